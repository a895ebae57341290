"""The manifest of one import job, in Table Storage (table ``importjobs``).

Imported by the function app for GET /api/imports/{job_id}, so this module must not import
pyspark. One entity per job: PartitionKey = the job id (escaped like the app's other keys),
RowKey = ``manifest``. Saving again replaces it, so a re-run of the same job keeps one manifest.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableClient, UpdateMode

from shared.adapters.table_archive import session_key

IMPORT_JOBS_TABLE = "importjobs"
_ROW_KEY = "manifest"


class ManifestNotFound(LookupError):
    """No manifest was saved for this job id."""


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

    @property
    def session_count(self) -> int:
        return len(self.sessions)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "session_count": self.session_count}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def to_entity(self) -> dict[str, Any]:
        return {
            "PartitionKey": session_key(self.job_id),
            "RowKey": _ROW_KEY,
            "job_id": self.job_id,
            "queue_name": self.queue_name,
            "rows_read": self.rows_read,
            "rows_rejected": self.rows_rejected,
            "rows_sent": self.rows_sent,
            "session_count": self.session_count,
            "source": self.source,
            "status": self.status,
            **_chunked(json.dumps(self.sessions, sort_keys=True, separators=(",", ":"))),
        }

    @classmethod
    def from_entity(cls, entity: Any) -> JobManifest:
        return cls(
            job_id=entity["job_id"],
            queue_name=entity.get("queue_name", ""),
            rows_read=int(entity["rows_read"]),
            rows_rejected=int(entity["rows_rejected"]),
            rows_sent=int(entity["rows_sent"]),
            sessions={k: int(v) for k, v in json.loads(_joined(entity) or "{}").items()},
            source=entity.get("source", ""),
            status=entity.get("status", "sent"),
        )


# A string property holds at most 64 KiB (32K UTF-16 characters): thousands of sessions are
# spread over sessions, sessions_1, sessions_2... (an entity holds up to 1 MiB).
_CHUNK = 30_000


def _chunked(text: str) -> dict[str, str]:
    parts = [text[i : i + _CHUNK] for i in range(0, len(text), _CHUNK)] or [""]
    return {("sessions" if n == 0 else f"sessions_{n}"): part for n, part in enumerate(parts)}


def _joined(entity: Any) -> str:
    parts = [entity.get("sessions") or ""]
    n = 1
    while f"sessions_{n}" in entity:
        parts.append(entity[f"sessions_{n}"])
        n += 1
    return "".join(parts)


class TableManifestStore:
    """Job manifests in one table (``importjobs``)."""

    def __init__(self, table: TableClient) -> None:
        self._table = table

    def save(self, manifest: JobManifest) -> None:
        """Insert or replace the manifest of ``manifest.job_id``."""
        self._table.upsert_entity(manifest.to_entity(), mode=UpdateMode.REPLACE)

    def get(self, job_id: str) -> JobManifest:
        """The manifest of ``job_id``; raises ``ManifestNotFound`` when there is none."""
        try:
            entity = self._table.get_entity(session_key(job_id), _ROW_KEY)
        except ResourceNotFoundError as error:
            raise ManifestNotFound(f"No import job {job_id!r} has a manifest.") from error
        return JobManifest.from_entity(entity)
