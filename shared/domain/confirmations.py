"""Bulk actions go in two steps: a preview says how many sessions of which groups an action
would touch and issues a confirmation token; the action runs only with that token, once,
before it expires, and only while the selection still holds the sessions the preview counted.
So no one replays or resolves ten thousand sessions by accident."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from .archive import SummaryFilter
from .errors import Conflict, InvalidInput
from .replays import BulkAction

TOKEN_LIFETIME = timedelta(minutes=15)


@dataclass(frozen=True)
class Selection:
    """Which failed sessions a bulk action is for; each field that is set must match.
    ``failed_from`` and ``failed_to``: the sessions that failed in that window (ISO times,
    ``shared.domain.time_windows``)."""

    queue: str | None = None
    task: str | None = None
    reason: str | None = None
    fingerprint: str | None = None
    failed_from: str | None = None
    failed_to: str | None = None

    def summaries(self, status: str | None) -> SummaryFilter:
        """The sessions with ``status`` among those the selection's queue, task, reason and
        window choose (the fingerprint is matched on what that lists)."""
        return SummaryFilter(
            queue=self.queue,
            task=self.task,
            reason=self.reason,
            status=status,
            failed_from=self.failed_from,
            failed_to=self.failed_to,
        )

    def check_chooses(self) -> None:
        """A bulk action chooses its sessions by a task, a reason or a time window (or any of
        them together), never by the queue alone: ``InvalidInput`` naming ``task``
        otherwise."""
        if not (self.task or self.reason or self.failed_from or self.failed_to):
            raise InvalidInput(
                "task",
                "or reason (or a window: failed_from, failed_to) is required: a bulk action "
                "chooses sessions by the task they failed at, why, or when",
            )


@dataclass(frozen=True)
class GroupCount:
    queue: str
    failed_task: str | None
    reason: str
    sessions: int


@dataclass(frozen=True)
class Confirmation:
    """What a preview promised: ``digest`` names the exact sessions it counted."""

    token: str
    action: BulkAction
    selection: Selection
    sessions: int
    digest: str
    expires_at: str


@dataclass(frozen=True)
class Preview:
    confirmation: Confirmation
    groups: tuple[GroupCount, ...]


def digest_of(session_ids: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(session_ids)).encode()).hexdigest()


def expiry(now: datetime) -> str:
    return (now + TOKEN_LIFETIME).isoformat()


class ConfirmationRefused(Conflict):
    """The token is unknown, used, expired, for another action, or its selection changed."""

    title = "The bulk action was not started"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def check(
    confirmation: Confirmation, action: BulkAction, session_ids: Iterable[str], now: datetime
) -> None:
    """Raises ``ConfirmationRefused`` unless ``confirmation`` still covers ``session_ids``."""
    if confirmation.action != action:
        raise ConfirmationRefused(
            f"This token confirms a bulk {confirmation.action}, not a bulk {action}: preview "
            f"the bulk {action}."
        )
    if datetime.fromisoformat(confirmation.expires_at) <= now:
        raise ConfirmationRefused(
            f"The preview expired at {confirmation.expires_at}: preview again and confirm within "
            f"{int(TOKEN_LIFETIME.total_seconds() // 60)} minutes."
        )
    current = list(session_ids)
    if digest_of(current) != confirmation.digest:
        raise ConfirmationRefused(
            f"The selection changed since the preview ({confirmation.sessions} session(s) then, "
            f"{len(current)} now): preview again to see what the action would touch."
        )
