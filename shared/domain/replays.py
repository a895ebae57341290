"""A bulk replay request and its progress."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from .archive import SummaryFilter
from .errors import NotFound

BulkAction = Literal["replay", "resolve"]


class ReplayRequestNotFound(NotFound):
    title = "Unknown replay request"

    def __init__(self, request_id: str) -> None:
        super().__init__(f"There is no replay request {request_id!r}.")
        self.request_id = request_id


@dataclass(frozen=True)
class ReplayRequest:
    """A bulk action on the failed sessions a filter chooses: replay them (``action``
    "replay") or resolve them without a replay ("resolve"). ``sent``: sessions this request
    replayed or resolved; ``taken``: sessions another replay or resolution had claimed first
    (``taken_sessions`` names the first of them and the claim that holds each); ``failed``:
    sessions that could not be replayed (``errors`` says why). ``who``, ``role`` and ``note``
    go to each session's audit trail (the API's ``POST /api/replays`` has no note).
    ``failed_from`` and ``failed_to`` (ISO times) choose the sessions that failed in
    ``[failed_from, failed_to)``."""

    request_id: str
    queue: str | None
    task: str | None
    reason: str | None
    status: Literal["queued", "running", "completed", "failed"] = "queued"
    found: int = 0
    sent: int = 0
    failed: int = 0
    errors: tuple[dict[str, str], ...] = field(default_factory=tuple)
    failure: str | None = None
    created_at: str = ""
    updated_at: str = ""
    taken: int = 0
    taken_sessions: tuple[dict[str, str], ...] = field(default_factory=tuple)
    action: BulkAction = "replay"
    who: str = ""
    note: str = ""
    role: str = ""
    failed_from: str | None = None
    failed_to: str | None = None

    def selects(self, status: str) -> SummaryFilter:
        """The failed sessions this request chooses, with ``status``."""
        return SummaryFilter(
            queue=self.queue,
            task=self.task,
            reason=self.reason,
            status=status,
            failed_from=self.failed_from,
            failed_to=self.failed_to,
        )
