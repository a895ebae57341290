"""Dead letters at rest, and the failed sessions they belong to.

A dead letter is archived as one row: the session is the partition and the sequence number the
row, so a partition read in key order gives the session's messages in the order they were sent.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from .envelope import parse_task_message, plain_properties, routing_hint
from .errors import Conflict, MalformedMessage, NotFound
from .reasons import SESSION_FAILED

FAILED: Literal["failed"] = "failed"
REPLAYED: Literal["replayed"] = "replayed"
RESOLVED: Literal["resolved"] = "resolved"  # by an operator, without a replay
Status = Literal["failed", "replayed", "resolved"]
# What a list of failed sessions may be narrowed to, as the API and the console spell it:
# one status, or "any" for all of them.
ANY_STATUS = "any"
STATUS_CHOICES = (FAILED, REPLAYED, RESOLVED, ANY_STATUS)


def status_filter(choice: str) -> str | None:
    """The ``SummaryFilter.status`` of one of ``STATUS_CHOICES``."""
    return None if choice == ANY_STATUS else choice


REPLAY: Literal["replay"] = "replay"
RESOLVE: Literal["resolve"] = "resolve"

# Fixed namespace: the same (session, idempotency key) always yields the same new session id.
_REPLAY_NAMESPACE = uuid.UUID("0b8a4f1e-34c5-4f8e-bb1c-9c6c1d6f7e21")


def row_key(sequence_number: int) -> str:
    """Zero-padded to 20 digits (a long's width), so string order is send order."""
    return f"{sequence_number:020d}"


def replay_session_id(session_id: str, idempotency_key: str) -> str:
    """Deterministic: repeating a replay request under the same key reuses the session."""
    name = "\n".join((session_id, idempotency_key))
    return f"replay-{uuid.uuid5(_REPLAY_NAMESPACE, name)}"


@dataclass(frozen=True)
class MessageCopy:
    """A message as its queue held it: what a dead letter and its archived row share."""

    queue: str
    session_id: str | None
    sequence_number: int
    message_id: str | None
    body: bytes
    content_type: str | None
    application_properties: Mapping[str, Any]


@dataclass(frozen=True)
class ArchivedMessage(MessageCopy):
    reason: str
    description: str
    enqueued_time: str | None
    delivery_count: int | None
    archived_at: str
    job_id: str | None = None
    task: str | None = None
    step: int | None = None
    is_last: bool = False
    status: Literal["failed", "replayed"] = FAILED
    replayed_session_id: str | None = None
    replay_key: str | None = None
    replayed_at: str | None = None
    trace_id: str | None = None  # the trace the message was sent in (its order's)

    @property
    def row_key(self) -> str:
        return row_key(self.sequence_number)

    def replayed(self, *, session_id: str, key: str, at: str) -> ArchivedMessage:
        return replace(
            self, status=REPLAYED, replayed_session_id=session_id, replay_key=key, replayed_at=at
        )


def routing_of(body: bytes, application_properties: Mapping[Any, Any]) -> dict[str, Any]:
    """job_id, task, step and is_last of a dead letter: from its body when it parses,
    else from its application properties, else unknown."""
    try:
        message = parse_task_message(body)
    except MalformedMessage:
        step, is_last = routing_hint(application_properties)
        props = plain_properties(application_properties)
        job_id, task = props.get("job_id"), props.get("task")
        return {
            "job_id": job_id if isinstance(job_id, str) else None,
            "task": task if isinstance(task, str) else None,
            "step": step,
            "is_last": is_last,
        }
    return {
        "job_id": message.job_id,
        "task": message.task,
        "step": message.step,
        "is_last": message.is_last,
    }


def pipeline_of(rows: Sequence[ArchivedMessage]) -> str | None:
    """The pipeline of a session's dead letters: from the first body that parses, else from
    the first ``pipeline`` application property, else unknown."""
    for row in rows:
        try:
            return parse_task_message(row.body).pipeline
        except MalformedMessage:
            continue
    for row in rows:
        pipeline = row.application_properties.get("pipeline")
        if isinstance(pipeline, str) and pipeline.strip():
            return pipeline
    return None


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


@dataclass(frozen=True)
class ReplayClaim:
    """The one action a failed session gets: the first request to claim the session's summary
    (under its idempotency key) either replays it, as ``new_session_id``, or resolves it
    without a replay (``action`` "resolve", no new session); every other request is refused."""

    key: str
    new_session_id: str  # "" for a resolution
    claimed_at: str
    action: Literal["replay", "resolve"] = REPLAY

    def holds(self, key: str, action: str) -> bool:
        """Whether this claim is the one a request with ``key`` for ``action`` made."""
        return self.key == key and self.action == action


def status_with(status: Status, claim: ReplayClaim | None) -> Status:
    """A session whose claim is a resolution is resolved, whatever its rows say (an archive
    run may still be adding the rest of its dead letters)."""
    return RESOLVED if claim is not None and claim.action == RESOLVE else status


# What the overview counts failed sessions by: (status, queue, failed task, reason).
GroupKey = tuple[str, str, str | None, str]


@dataclass(frozen=True)
class SummaryFilter:
    """Which failed sessions to list: each field that is set must match."""

    queue: str | None = None
    task: str | None = None
    reason: str | None = None
    status: str | None = None  # "failed", "replayed", "resolved", or None for any


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
    )


class SessionNotArchived(NotFound):
    title = "Unknown session"

    def __init__(self, session_id: str) -> None:
        super().__init__(f"No dead letters are archived for session {session_id!r}.")
        self.session_id = session_id


class ReplayIncomplete(Conflict):
    title = "The session cannot be replayed now"

    def __init__(self, session_id: str, count: int) -> None:
        super().__init__(
            f"The archive holds {count} message(s) of session {session_id!r} but not its last "
            "one yet: the rest may still be on their way to the dead-letter queue. Wait for the "
            "next archive run, or replay with force=true to send what is there."
        )
        self.session_id = session_id


def claimed_elsewhere(session_id: str, claim: ReplayClaim) -> ClaimedElsewhere:
    """The refusal of a request that found ``claim`` holding the session."""
    if claim.action == RESOLVE:
        return AlreadyResolved(session_id, claim)
    return AlreadyReplayed(session_id, claim)


class ClaimedElsewhere(Conflict):
    """Another request replayed or resolved the session first; ``claim`` is its claim."""

    template = ""  # the detail, formatted with the session id and the claim

    def __init__(self, session_id: str, claim: ReplayClaim) -> None:
        super().__init__(self.template.format(session_id=session_id, claim=claim))
        self.session_id = session_id
        self.claim = claim


class AlreadyResolved(ClaimedElsewhere):
    """An operator resolved the session without a replay: it is never replayed."""

    title = "The session was resolved"
    template = (
        "Session {session_id!r} was resolved without a replay at {claim.claimed_at} ({claim.key!r})"
        ": it is not replayed, nor resolved again. Its history says who resolved it and why."
    )

    @property
    def members(self) -> Mapping[str, Any]:
        return {"resolution": {"idempotency_key": self.claim.key, "at": self.claim.claimed_at}}


class AlreadyReplayed(ClaimedElsewhere):
    """Another replay claimed the session first: it is replayed (or being replayed) as
    ``claim.new_session_id`` under another Idempotency-Key."""

    title = "The session cannot be replayed now"
    template = (
        "Session {session_id!r} was already replayed as {claim.new_session_id!r} under another"
        " Idempotency-Key ({claim.key!r}, claimed at {claim.claimed_at}). Follow that replay;"
        " replay its session instead if it failed again."
    )

    @property
    def replayed_session_id(self) -> str:
        return self.claim.new_session_id

    @property
    def members(self) -> Mapping[str, Any]:
        return {
            "replay": {
                "new_session_id": self.claim.new_session_id,
                "idempotency_key": self.claim.key,
                "claimed_at": self.claim.claimed_at,
            }
        }
