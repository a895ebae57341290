"""A product import job as its users see it: the manifest the Spark job writes once it has
sent the rows, and what the import tasks made of them."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from .errors import NotFound


class ManifestNotFound(NotFound):
    """No manifest was saved for this job id."""

    title = "Unknown import job"

    def __init__(self, job_id: str) -> None:
        super().__init__(f"No import job {job_id!r} has a manifest.")
        self.job_id = job_id


class ImportJobNotFound(NotFound):
    """Nothing is known of this job: no manifest and no row recorded by the import tasks."""

    title = "Unknown import job"

    def __init__(self, job_id: str) -> None:
        super().__init__(
            f"There is no import job {job_id!r}: the Spark job has not saved its manifest and "
            "no row of it has been imported yet. Check the job id, or ask again once the job runs."
        )
        self.job_id = job_id


@dataclass(frozen=True)
class JobManifest:
    job_id: str
    queue_name: str
    rows_read: int
    rows_rejected: int
    rows_sent: int
    # session id -> number of messages in it (the last one carries is_last).
    sessions: dict[str, int] = field(default_factory=dict)
    source: str = ""
    status: str = "sent"
    trace_id: str | None = None  # the job's trace, when it exported telemetry

    @property
    def session_count(self) -> int:
        return len(self.sessions)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "session_count": self.session_count}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


ImportState = Literal["sending", "importing", "completed"]


@dataclass(frozen=True)
class ImportJobStatus:
    """Rows read, rejected and sent come from the manifest (``None`` until the Spark job has
    saved it); rows imported and failed from what the import tasks recorded."""

    job_id: str
    status: ImportState
    rows_read: int | None
    rows_rejected: int | None
    rows_sent: int | None
    rows_imported: int
    rows_failed: int
    rows_pending: int | None  # to import (read - rejected) but not yet imported or failed
    sessions: int | None
    queue_name: str | None
    source: str | None


def import_job_status(
    job_id: str, manifest: JobManifest | None, counts: dict[str, int]
) -> ImportJobStatus:
    """Raises ``ImportJobNotFound`` when there is neither a manifest nor a recorded row.

    "sending" until the manifest exists (rows can be imported while the job still sends),
    "importing" while some sent rows have no outcome yet, then "completed"."""
    imported, failed = counts.get("imported", 0), counts.get("failed", 0)
    if manifest is None:
        if not (imported or failed):
            raise ImportJobNotFound(job_id)
        return ImportJobStatus(
            job_id, "sending", None, None, None, imported, failed, None, None, None, None
        )
    # Not rows_sent: it counts re-sends of retried Spark tasks too, which the queue's duplicate
    # detection dropped. Every row read and not rejected was sent once.
    pending = max(manifest.rows_read - manifest.rows_rejected - imported - failed, 0)
    return ImportJobStatus(
        job_id=job_id,
        status="importing" if pending else "completed",
        rows_read=manifest.rows_read,
        rows_rejected=manifest.rows_rejected,
        rows_sent=manifest.rows_sent,
        rows_imported=imported,
        rows_failed=failed,
        rows_pending=pending,
        sessions=manifest.session_count,
        queue_name=manifest.queue_name,
        source=manifest.source,
    )
