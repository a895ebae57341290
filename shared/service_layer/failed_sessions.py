"""The operator's view of failed sessions: list them, inspect one, and group them after an
incident."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from ..domain.archive import ArchivedMessage, FailedSession, SummaryFilter
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
    selected: SummaryFilter,
    *,
    page_size: int = 50,
    continuation: str | None = None,
) -> Page[FailedSession]:
    """One page of the sessions ``selected``; pass ``continuation`` back for the next.
    Raises ``InvalidInput`` ("continuation") for a token this API did not return."""
    return archive.list_summaries(selected, page_size=page_size, continuation=continuation)


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
    return _largest_first(
        Counter(
            (s.queue, s.failed_task, s.reason)
            for s in every_session(archive, SummaryFilter(queue=queue, status=status))
        )
    )


def group_by_status(archive: DeadLetterArchive) -> dict[str, list[FailureGroup]]:
    """``group_failed_sessions`` for every status at once, from the archive's counts (not
    from a list of every session per status)."""
    counts: dict[str, Counter[tuple[str, str | None, str]]] = {}
    for (status, queue, task, reason), n in archive.count_sessions().items():
        counts.setdefault(status, Counter())[(queue, task, reason)] += n
    return {status: _largest_first(groups) for status, groups in counts.items()}


def _largest_first(counts: Counter[tuple[str, str | None, str]]) -> list[FailureGroup]:
    return [
        FailureGroup(queue, task, reason, n)
        for (queue, task, reason), n in sorted(
            counts.items(), key=lambda item: (-item[1], item[0][0], item[0][1] or "", item[0][2])
        )
    ]


def every_session(archive: DeadLetterArchive, selected: SummaryFilter) -> Iterator[FailedSession]:
    """Every session ``selected``, read a page at a time."""
    continuation: str | None = None
    while True:
        page = archive.list_summaries(selected, page_size=MAX_PAGE_SIZE, continuation=continuation)
        yield from page.items
        continuation = page.continuation
        if not continuation:
            return
