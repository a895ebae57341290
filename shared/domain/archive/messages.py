"""Dead letters at rest: one archived row per message. The session is the partition and the
sequence number the row, so a partition read in key order gives the session's messages in the
order they were sent. A row, and a session, is failed, replayed, or resolved."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from ..envelope import parse_task_message, plain_properties, routing_hint
from ..errors import MalformedMessage

FAILED: Literal["failed"] = "failed"
REPLAYED: Literal["replayed"] = "replayed"
RESOLVED: Literal["resolved"] = "resolved"  # by an operator, without a replay
Status = Literal["failed", "replayed", "resolved"]


def row_key(sequence_number: int) -> str:
    """Zero-padded to 20 digits (a long's width), so string order is send order."""
    return f"{sequence_number:020d}"


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
