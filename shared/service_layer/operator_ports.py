"""The outside world as the operator's services see it (the console's and the API's): dead
letters still waiting to be archived, the audit trail of operators' actions, bulk actions'
confirmation tokens and pipelines' pauses; and the ports an operator's replay or resolution
of one session uses. Real adapters in ``shared.adapters``, twins in ``tests/fakes.py``."""

from __future__ import annotations

from typing import NamedTuple, Protocol

from ..domain.audit import AuditEntry
from ..domain.confirmations import BulkAction, Confirmation, Selection
from ..domain.pauses import ManualPause
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


class ReplayPorts(NamedTuple):
    """What replaying or resolving one session reads, sends and records with (in the order
    ``replay_for_operator`` and ``edit_and_replay`` take them)."""

    archive: DeadLetterArchive
    resender: MessageResender
    seeder: SessionSeeder
    audit: AuditTrail
