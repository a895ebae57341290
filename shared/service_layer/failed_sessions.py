"""The operator's view of failed sessions: list them, inspect one, and group them after an
incident."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ..domain.archive import ArchivedMessage, FailedSession
from .ports import DeadLetterArchive, Page

MAX_PAGE_SIZE = 200


@dataclass(frozen=True)
class FailureGroup:
    queue: str
    failed_task: str | None
    reason: str
    sessions: int


def list_failed_sessions(
    archive: DeadLetterArchive,
    *,
    queue: str | None = None,
    task: str | None = None,
    reason: str | None = None,
    status: str | None = "failed",
    page_size: int = 50,
    continuation: str | None = None,
) -> Page[FailedSession]:
    """One page of the failed sessions that match; pass ``continuation`` back for the next."""
    return archive.list_summaries(
        queue=queue,
        task=task,
        reason=reason,
        status=status,
        page_size=page_size,
        continuation=continuation,
    )


def get_failed_session(
    archive: DeadLetterArchive, session_id: str
) -> tuple[FailedSession, list[ArchivedMessage]]:
    """The session's summary and its archived messages in send order. Raises
    ``SessionNotArchived``."""
    summary = archive.get_summary(session_id)
    return summary, archive.list_session(session_id)


def group_failed_sessions(
    archive: DeadLetterArchive, *, status: str | None = "failed", queue: str | None = None
) -> list[FailureGroup]:
    """Counts of sessions by (queue, failed task, reason), largest first: "42 sessions failed
    at ProcessPayment: PaymentProviderUnavailable"."""
    counts: Counter[tuple[str, str | None, str]] = Counter()
    continuation: str | None = None
    while True:
        page = archive.list_summaries(
            status=status, queue=queue, page_size=MAX_PAGE_SIZE, continuation=continuation
        )
        counts.update((s.queue, s.failed_task, s.reason) for s in page.items)
        continuation = page.continuation
        if not continuation:
            break
    return [
        FailureGroup(queue, task, reason, n)
        for (queue, task, reason), n in sorted(
            counts.items(), key=lambda item: (-item[1], item[0][0], item[0][1] or "", item[0][2])
        )
    ]
