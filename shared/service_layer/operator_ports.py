"""The outside world as the operator's services see it (the console's and the API's): dead
letters still waiting to be archived, the audit trail of operators' actions, bulk actions'
confirmation tokens and pipelines' pauses; and the ports an operator's replay or resolution
of one session uses. Real adapters in ``shared.adapters``, twins in ``tests/fakes.py``."""

from __future__ import annotations

from typing import NamedTuple, Protocol

from ..domain.alerts import TimerRun
from ..domain.audit import AuditEntry
from ..domain.confirmations import BulkAction, Confirmation, Selection
from ..domain.pauses import ManualPause
from ..domain.retention import Keep
from .ports import DeadLetterArchive, MessageResender, SessionSeeder


class DeadLetterCounter(Protocol):
    def waiting(self, queue: str, *, up_to: int) -> int:
        """Dead letters in the queue's dead-letter sub-queue (not archived yet), at most
        ``up_to``; reading them moves and locks nothing."""
        ...


class AuditTrail(Protocol):
    def record(self, entry: AuditEntry) -> None:
        """Keep one action on a failed session; entries are never changed."""
        ...

    def history(self, session_id: str) -> list[AuditEntry]:
        """The session's entries, oldest first; empty when there are none."""
        ...

    def between(self, start: str | None, end: str | None, *, up_to: int) -> list[AuditEntry]:
        """Entries of every session recorded in ``[start, end)`` (ISO times; None leaves that
        end open), at most ``up_to`` of them, in no particular order."""
        ...


class Confirmations(Protocol):
    def issue(
        self, action: BulkAction, selection: Selection, sessions: int, digest: str, expires_at: str
    ) -> Confirmation:
        """A new single-use token confirming ``action`` on the ``sessions`` selected (their
        ids' ``digest``), valid until ``expires_at``."""
        ...

    def redeem(self, token: str) -> Confirmation:
        """Once per token; raises ``ConfirmationRefused`` when unknown or already redeemed."""
        ...


class PipelinePauses(Protocol):
    """Operators' pauses of pipelines, one per pipeline at most, seen by every instance."""

    def find(self, pipeline: str) -> ManualPause | None:
        """The pipeline's pause; None when it runs."""
        ...

    def pause(self, pipeline: str, pause: ManualPause) -> ManualPause:
        """Pause the pipeline; returns the pause in force (an earlier one stays, with its
        author and note, when the pipeline is paused already)."""
        ...

    def resume(self, pipeline: str) -> ManualPause | None:
        """End the pipeline's pause; returns the pause it ended (None: it ran already)."""
        ...


class TimerRuns(Protocol):
    def started(self, timer: str, at: str) -> None:
        """A run of ``timer`` started at ``at``."""
        ...

    def succeeded(self, timer: str, at: str, *, started_at: str, drained: bool) -> None:
        """The run that started at ``started_at`` ended well at ``at``; ``drained``: it left
        nothing behind for the next run."""
        ...

    def failed(self, timer: str, at: str, error: str) -> None:
        """A run of ``timer`` failed at ``at`` on ``error`` (a line a person can read)."""
        ...

    def find(self, timer: str) -> TimerRun | None:
        """What the runs of ``timer`` left behind, or None before its first run."""
        ...


class RetentionStore(Protocol):
    """Deletes what outlived its lifetime (``shared.domain.retention``), in batches (entity
    group transactions of at most 100, Blob batch deletes), stopping between batches once
    ``until`` (a ``time.monotonic()`` instant) has passed. Each returns how many rows or blobs
    it deleted, by table or container, and whether it finished."""

    def purge_idempotency_keys(self, before: str, until: float) -> Purged:
        """Idempotency-Key records whose request started before ``before``."""
        ...

    def purge_confirmations(self, before: str, until: float) -> Purged:
        """Bulk previews' tokens that expired before ``before``."""
        ...

    def purge_replay_requests(self, before: str, until: float) -> Purged:
        """Bulk requests that completed or failed, last updated before ``before``; never one
        still queued or running."""
        ...

    def purge_audit(self, before: str, until: float) -> Purged:
        """Audit entries recorded before ``before``."""
        ...

    def purge_sessions(self, status: str, before: str, keep: Keep, until: float) -> Purged:
        """Failed sessions ``replayed`` or ``resolved`` before ``before`` (their summary, their
        archived messages and those messages' blobs), but for the sessions of a job in
        ``keep``."""
        ...

    def purge_jobs(self, before: str, keep: Keep, until: float) -> Purged:
        """Jobs that ended (completed or failed) with their last step before ``before``: an
        order's progress, its sessions' outcomes, its charge, its order number's allocation and
        its receipt; an import's manifest and row outcomes; any other pipeline's outcomes.
        Never a job still running, nor one in ``keep``."""
        ...


class Purged(NamedTuple):
    deleted: dict[str, int]
    finished: bool


class ReplayPorts(NamedTuple):
    """What replaying or resolving one session reads, sends and records with (in the order
    ``replay_for_operator`` and ``edit_and_replay`` take them)."""

    archive: DeadLetterArchive
    resender: MessageResender
    seeder: SessionSeeder
    audit: AuditTrail
