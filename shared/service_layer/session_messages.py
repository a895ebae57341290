"""What the session processor takes (one received message, its tasks) and what it gives back
(the outcome), apart from the processor itself so tasks and observers can name them."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..domain.envelope import TaskMessage


class Outcome(enum.Enum):
    COMPLETED = "completed"
    ALREADY_DONE = "already-done"  # a redelivery of finished work: completed, task not run
    DEAD_LETTERED = "dead-lettered"
    ABANDONED = "abandoned"  # handed back for another attempt


@dataclass(frozen=True)
class Result:
    """The outcome of one message, and what it meant for its session (for telemetry).

    ``task``/``step``: the message's (None when its body could not be read); ``attempt``: the
    task's attempt when it ran; ``opens_session``: the session had no state before this
    message; ``fails_session``: this message marked the session failed; ``ends_session``: the
    session's last message was settled."""

    outcome: Outcome
    reason: str | None = None
    description: str | None = None
    task: str | None = None
    step: int | None = None
    attempt: int | None = None
    opens_session: bool = False
    fails_session: bool = False
    ends_session: bool = False


@dataclass(frozen=True)
class IncomingMessage:
    """What the processor needs from a received Service Bus message."""

    body: bytes
    session_id: str
    # Earlier deliveries, when the trigger hands the count over (None when it does not, as
    # Azure's Service Bus binding for Python): a floor for the attempt, never the count itself.
    delivery_count: int | None = None
    message_id: str | None = None
    # As sent: str keys, string values as str (``envelope.plain_properties``).
    application_properties: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskInvocation:
    message: TaskMessage
    session_id: str
    context: Mapping[str, Any]  # outputs of earlier tasks of the session
    attempt: int


Task = Callable[[TaskInvocation], Mapping[str, Any]]
# Told of every final decision (not of abandons for a retry), before the message is settled.
Observer = Callable[[IncomingMessage, TaskMessage | None, Outcome, str | None], None]


@dataclass(frozen=True)
class BatchTask:
    """A task that a batch of messages runs in two parts: ``prepare`` checks one message and
    returns what it writes (raising as a task does: ``PermanentTaskError`` for a bad row), and
    ``write`` writes the prepared items of the batch's consecutive good messages together
    (raising when any could not be written). The outputs of such a task are empty."""

    prepare: Callable[[TaskInvocation], Any]
    write: Callable[[Sequence[Any]], None]


Told = tuple[IncomingMessage, TaskMessage | None, Outcome, str | None]


@runtime_checkable
class BatchObserver(Protocol):
    """An observer that can also be told of several messages in one call (a batch's
    completed ones), before they are settled."""

    def __call__(
        self,
        incoming: IncomingMessage,
        message: TaskMessage | None,
        outcome: Outcome,
        reason: str | None,
    ) -> None: ...

    def many(self, told: Sequence[Told]) -> None: ...
