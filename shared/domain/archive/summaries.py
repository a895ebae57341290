"""Failed sessions as an operator sees them: summarized from their archived rows and the
processor's failure record, listed and grouped by a filter."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..reasons import SESSION_FAILED
from .claims import ReplayClaim
from .messages import FAILED, REPLAYED, RESOLVED, ArchivedMessage, Status

# What a list of failed sessions may be narrowed to, as the API and the console spell it:
# one status, or "any" for all of them.
ANY_STATUS = "any"
STATUS_CHOICES = (FAILED, REPLAYED, RESOLVED, ANY_STATUS)


def status_filter(choice: str) -> str | None:
    """The ``SummaryFilter.status`` of one of ``STATUS_CHOICES``."""
    return None if choice == ANY_STATUS else choice


@dataclass(frozen=True)
class FailureRecord:
    """What the processor knew when it marked the session failed: the first failure and the
    context (order number, total, ...) that a replay must carry over."""

    task: str
    step: int | None
    reason: str
    description: str
    at: str
    context: Mapping[str, Any] = field(default_factory=dict)


# What the overview counts failed sessions by: (status, queue, failed task, reason).
GroupKey = tuple[str, str, str | None, str]


@dataclass(frozen=True)
class SummaryFilter:
    """Which failed sessions to list: each field that is set must match. ``failed_from`` and
    ``failed_to`` (ISO times, ``shared.domain.time_windows``) choose the sessions that failed
    in ``[failed_from, failed_to)``."""

    queue: str | None = None
    task: str | None = None
    reason: str | None = None
    status: str | None = None  # "failed", "replayed", "resolved", or None for any
    failed_from: str | None = None
    failed_to: str | None = None


@dataclass(frozen=True)
class FailedSession:
    """One failed session as an operator sees it."""

    session_id: str
    queue: str
    failed_task: str | None
    failed_step: int | None
    reason: str
    description: str
    failed_at: str | None
    message_count: int
    has_last: bool
    context: Mapping[str, Any]
    status: Status = FAILED
    replayed_session_id: str | None = None
    replay_key: str | None = None
    replayed_at: str | None = None
    claim: ReplayClaim | None = None  # set when a replay claimed it, before anything is sent
    trace_id: str | None = None  # the failed session's trace (its order's)
    job_id: str | None = None  # the job its messages carry (None in summaries made before)


def summarize(
    session_id: str, rows: Sequence[ArchivedMessage], record: FailureRecord | None
) -> FailedSession:
    """The operator's view of a session from its archived rows (in key order) and, when the
    processor recorded one, its failure record."""
    if not rows:
        raise ValueError("a failed session has at least one archived message")
    first_cause = next((r for r in rows if r.reason != SESSION_FAILED), rows[0])
    replayed = [r for r in rows if r.status == REPLAYED]
    last_replay = replayed[-1] if len(replayed) == len(rows) else None
    return FailedSession(
        session_id=session_id,
        queue=rows[0].queue,
        failed_task=record.task if record else first_cause.task,
        failed_step=record.step if record else first_cause.step,
        reason=record.reason if record else first_cause.reason,
        description=record.description if record else first_cause.description,
        failed_at=record.at if record else first_cause.enqueued_time,
        message_count=len(rows),
        has_last=any(r.is_last for r in rows),
        context=dict(record.context) if record else {},
        status=REPLAYED if last_replay else FAILED,
        replayed_session_id=last_replay.replayed_session_id if last_replay else None,
        replay_key=last_replay.replay_key if last_replay else None,
        replayed_at=last_replay.replayed_at if last_replay else None,
        trace_id=next((r.trace_id for r in rows if r.trace_id), None),
        job_id=next((r.job_id for r in rows if r.job_id), None),
    )
