"""Idempotent requests and an import's progress and manifests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ...domain.idempotency import IdempotencyRecord
from ...domain.import_jobs import JobManifest


class IdempotencyRecords(Protocol):
    """One record per (scope, Idempotency-Key); ``version`` is the store's ETag."""

    def start(
        self, scope: str, key: str, record: IdempotencyRecord
    ) -> tuple[bool, IdempotencyRecord]:
        """Insert ``record`` unless the key has one: (True, the record as stored) or (False,
        the record found)."""
        ...

    def take_over(
        self, scope: str, key: str, stale: IdempotencyRecord, record: IdempotencyRecord
    ) -> IdempotencyRecord | None:
        """Replace ``stale`` with ``record`` if it is unchanged (its version); else None."""
        ...

    def finish(self, scope: str, key: str, record: IdempotencyRecord) -> None:
        """Store the finished request's result (overwrites)."""
        ...

    def release(self, scope: str, key: str, record: IdempotencyRecord) -> None:
        """Delete the record if it is still ``record`` (its version): the key is free again."""
        ...


@dataclass(frozen=True)
class RowOutcome:
    """The outcome of one import row, as ``ImportProgress.record`` takes it."""

    job_id: str
    session_id: str
    step: int | None
    status: str
    reason: str | None = None


class ImportProgress(Protocol):
    """Import row outcomes: one record per row (``record``, ``record_many``), or one per run
    of consecutive imported rows of a session (``record_run``). A row's own record wins over
    any run that covers it, so failed rows and replays are recorded row by row."""

    def record(
        self, job_id: str, session_id: str, step: int | None, *, status: str, reason: str | None
    ) -> None:
        """Upsert the outcome of one import row ("imported" or "failed")."""
        ...

    def record_many(self, rows: Sequence[RowOutcome]) -> None:
        """Upsert the outcomes of several rows, in as few requests as the store allows (one
        per partition and 100 rows); a row given twice keeps its last outcome."""
        ...

    def record_run(self, job_id: str, session_id: str, first_step: int, last_step: int) -> None:
        """Record rows ``first_step``..``last_step`` (inclusive) of the session as imported,
        in one record. A run that starts at the same step replaces it, whatever its length
        (a redelivered batch starts again at its first unfinished row); runs that overlap
        count each row once."""
        ...

    def counts(self, job_id: str, *, session_id: str | None = None) -> dict[str, int]:
        """Rows of the job (or of one session of it) by final status, each row once: its own
        record's status when it has one, else "imported" when a run covers it. Empty when
        none yet."""
        ...


class ImportManifests(Protocol):
    def get(self, job_id: str) -> JobManifest:
        """The manifest the Spark job saved once it sent the job's rows; raises
        ``ManifestNotFound`` before that (or for an unknown job)."""
        ...

    def list_manifests(self, *, up_to: int) -> list[JobManifest]:
        """The saved manifests, at most ``up_to`` of them (in no particular order)."""
        ...
