"""Handle one message of a session: the heart of the pipelines.

Every decision reads the JSON session state first and writes it before the message is
settled, so a crash at any point and the redelivery that follows are safe. The full
behaviour table is in docs/processor.md; each row has a test in tests/unit/test_processor.py.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..domain.archive import FailureRecord
from ..domain.envelope import TaskMessage, parse_task_message, routing_hint
from ..domain.errors import MalformedMessage, TaskFailed
from ..domain.session_state import (
    CORRUPT_SESSION_STATE,
    CorruptSessionState,
    SessionState,
    decode_session_state,
)
from .ports import FailureJournal, SessionActions

logger = logging.getLogger(__name__)

SESSION_FAILED = "SessionFailed"
PREVIOUS_STEP_MISSING = "PreviousStepMissing"
MALFORMED_MESSAGE = "MalformedMessage"
UNHANDLED_ERROR = "UnhandledError"


class FailurePolicy(enum.Enum):
    STOP_ON_FAILURE = "stop-on-failure"  # purchase: nothing after a failed task may run
    CONTINUE_ON_FAILURE = "continue-on-failure"  # product import: a bad row is set aside


class Outcome(enum.Enum):
    COMPLETED = "completed"
    ALREADY_DONE = "already-done"  # a redelivery of finished work: completed, task not run
    DEAD_LETTERED = "dead-lettered"
    ABANDONED = "abandoned"  # handed back for another attempt


@dataclass(frozen=True)
class Result:
    outcome: Outcome
    reason: str | None = None
    description: str | None = None


@dataclass(frozen=True)
class RetryPolicy:
    """Transient errors are retried by redelivery (sleep, then abandon) until ``max_attempts``.

    ``max_attempts`` must stay below the queue's MaxDeliveryCount (10 by default): the app,
    not Service Bus, must be the one that gives up, or the session would never be marked failed.
    """

    max_attempts: int = 5
    min_backoff: float = 1.0
    max_backoff: float = 30.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if not 0 <= self.min_backoff <= self.max_backoff:
            raise ValueError("backoffs must satisfy 0 <= min_backoff <= max_backoff")

    def backoff(self, attempt: int) -> float:
        return float(min(self.max_backoff, self.min_backoff * 2 ** (attempt - 1)))


@dataclass(frozen=True)
class IncomingMessage:
    """What the processor needs from a received Service Bus message."""

    body: bytes
    session_id: str
    attempt: int = 1  # 1 on first delivery (the SDK's delivery_count + 1)
    message_id: str | None = None
    application_properties: Mapping[Any, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskInvocation:
    message: TaskMessage
    session_id: str
    context: Mapping[str, Any]  # outputs of earlier tasks of the session
    attempt: int


Task = Callable[[TaskInvocation], Mapping[str, Any]]
# Told of every final decision (not of abandons for a retry), before the message is settled.
Observer = Callable[[IncomingMessage, TaskMessage | None, "Outcome", str | None], None]


class SessionProcessor:
    def __init__(
        self,
        *,
        pipeline: str,
        tasks: Mapping[str, Task],
        policy: FailurePolicy,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        journal: FailureJournal | None = None,
        observer: Observer | None = None,
    ) -> None:
        self.pipeline = pipeline
        self._journal = journal
        self._observer = observer
        self.tasks = dict(tasks)
        self.policy = policy
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        self._clock = clock

    def handle(self, incoming: IncomingMessage, actions: SessionActions) -> Result:
        try:
            state = decode_session_state(actions.get_state())
        except CorruptSessionState as error:
            return self._corrupt_state(incoming, actions, error)
        try:
            message = self._parse(incoming.body)
        except MalformedMessage as error:
            return self._malformed(incoming, actions, state, error)

        if state is None:
            if message.is_last and message.step > 1 and incoming.attempt > 1:
                # Only this message's own earlier delivery can have cleared the state: it ran,
                # cleared the state and crashed before it was settled.
                return self._already_done(message, incoming, actions)
            state = SessionState()
        if state.is_failed:
            return self._short_circuit(message, incoming, actions, state)
        if message.step < state.next_step:
            skipped = state.skipped_at(message.task, message.step)
            if skipped is not None:
                # ContinueOnFailure: this row was dead-lettered, the state was written, then
                # the dead-letter was lost (a crash in between). Finish it with its own reason.
                return self._dead_letter(
                    incoming, actions, message, state, skipped.reason, skipped.description
                )
            return self._already_done(message, incoming, actions)
        if message.step > state.next_step and self.policy is FailurePolicy.STOP_ON_FAILURE:
            description = (
                f"Step {message.step} ({message.task}) arrived but step {state.next_step} never "
                "ran: an earlier message of the session is missing (look for it in the "
                "dead-letter queue, e.g. MaxDeliveryCountExceeded), then replay the session."
            )
            return self._fail(message, incoming, actions, state, PREVIOUS_STEP_MISSING, description)
        return self._run(message, incoming, actions, state)

    # -- decisions ---------------------------------------------------------------------------

    def _run(
        self,
        message: TaskMessage,
        incoming: IncomingMessage,
        actions: SessionActions,
        state: SessionState,
    ) -> Result:
        task = self.tasks[message.task]
        invocation = TaskInvocation(
            message, incoming.session_id, dict(state.context), incoming.attempt
        )
        try:
            outputs = task(invocation)
        except TaskFailed as error:
            if error.retryable:
                return self._retry_or_give_up(
                    message, incoming, actions, state, error.reason, error.description
                )
            return self._task_failed(
                message, incoming, actions, state, error.reason, error.description
            )
        except Exception as error:  # a bug or an unexpected outage: retry, then set aside
            logger.exception(
                "Task %s (step %d) of session %s raised %s",
                message.task,
                message.step,
                incoming.session_id,
                type(error).__name__,
            )
            description = f"{type(error).__name__}: {error}"
            return self._retry_or_give_up(
                message, incoming, actions, state, UNHANDLED_ERROR, description
            )
        new_state = state.after_success(message.task, message.step, dict(outputs))
        self._write(actions, message.is_last, new_state)
        self._observe(incoming, message, Outcome.COMPLETED)
        actions.complete()
        return Result(Outcome.COMPLETED)

    def _retry_or_give_up(
        self,
        message: TaskMessage,
        incoming: IncomingMessage,
        actions: SessionActions,
        state: SessionState,
        reason: str,
        description: str,
    ) -> Result:
        if incoming.attempt < self.retry.max_attempts:
            delay = self.retry.backoff(incoming.attempt)
            logger.warning(
                "Task %s of session %s failed (attempt %d of %d): %s; retrying in %.1fs",
                message.task,
                incoming.session_id,
                incoming.attempt,
                self.retry.max_attempts,
                reason,
                delay,
            )
            self._sleep(delay)
            actions.abandon()
            return Result(Outcome.ABANDONED, reason, description)
        description = f"Gave up after {incoming.attempt} attempts. Last error: {description}"
        return self._task_failed(message, incoming, actions, state, reason, description)

    def _task_failed(
        self,
        message: TaskMessage,
        incoming: IncomingMessage,
        actions: SessionActions,
        state: SessionState,
        reason: str,
        description: str,
    ) -> Result:
        if self.policy is FailurePolicy.STOP_ON_FAILURE:
            return self._fail(message, incoming, actions, state, reason, description)
        new_state = state.after_skipped_failure(
            task=message.task,
            step=message.step,
            reason=reason,
            description=description,
            at=self._clock(),
        )
        return self._dead_letter(incoming, actions, message, new_state, reason, description)

    def _fail(
        self,
        message: TaskMessage,
        incoming: IncomingMessage,
        actions: SessionActions,
        state: SessionState,
        reason: str,
        description: str,
    ) -> Result:
        new_state = state.mark_failed(
            task=message.task,
            step=message.step,
            reason=reason,
            description=description,
            at=self._clock(),
        )
        self._record_failure(incoming, state, new_state)
        return self._dead_letter(incoming, actions, message, new_state, reason, description)

    def _short_circuit(
        self,
        message: TaskMessage,
        incoming: IncomingMessage,
        actions: SessionActions,
        state: SessionState,
    ) -> Result:
        failure = state.failure
        if failure is not None and failure.step == message.step and failure.task == message.task:
            # The failing message itself, redelivered after its state was written: finish
            # dead-lettering it with its own reason.
            return self._dead_letter(
                incoming, actions, message, state, failure.reason, failure.description
            )
        if failure is None:
            description = "Not run: the session was marked failed earlier."
        else:
            description = (
                f"Not run: the session failed at step {failure.step} ({failure.task}) "
                f"with {failure.reason}: {failure.description}"
            )
        return self._dead_letter(incoming, actions, message, state, SESSION_FAILED, description)

    def _already_done(
        self, message: TaskMessage, incoming: IncomingMessage, actions: SessionActions
    ) -> Result:
        self._observe(incoming, message, Outcome.ALREADY_DONE)
        actions.complete()
        return Result(Outcome.ALREADY_DONE)

    def _malformed(
        self,
        incoming: IncomingMessage,
        actions: SessionActions,
        state: SessionState | None,
        error: MalformedMessage,
    ) -> Result:
        step, is_last = routing_hint(incoming.application_properties)
        description = f"The message cannot be read: {error}. Fix the sender; nothing was run."
        current = state or SessionState()
        if self.policy is FailurePolicy.STOP_ON_FAILURE:
            new_state = current.mark_failed(
                task="(unreadable message)",
                step=step,
                reason=MALFORMED_MESSAGE,
                description=description,
                at=self._clock(),
            )
            self._record_failure(incoming, current, new_state)
        else:
            new_state = current.after_skipped_failure(
                task="(unreadable message)",
                step=step if step is not None else 0,
                reason=MALFORMED_MESSAGE,
                description=description,
                at=self._clock(),
            )
        self._observe(incoming, None, Outcome.DEAD_LETTERED, MALFORMED_MESSAGE)
        self._write_and_dead_letter(actions, is_last, new_state, MALFORMED_MESSAGE, description)
        return Result(Outcome.DEAD_LETTERED, MALFORMED_MESSAGE, description)

    def _corrupt_state(
        self, incoming: IncomingMessage, actions: SessionActions, error: CorruptSessionState
    ) -> Result:
        try:
            message: TaskMessage | None = self._parse(incoming.body)
        except MalformedMessage:
            message = None
        hint_step, hint_last = routing_hint(incoming.application_properties)
        step = message.step if message else hint_step
        is_last = message.is_last if message else hint_last
        description = (
            f"The session state could not be read ({error}); the session is treated as "
            "failed so that nothing runs out of order. Replay it from the archive."
        )
        new_state = SessionState().mark_failed(
            task=message.task if message else "(unknown)",
            step=step,
            reason=CORRUPT_SESSION_STATE,
            description=description,
            at=self._clock(),
        )
        self._record_failure(incoming, None, new_state)
        self._observe(incoming, message, Outcome.DEAD_LETTERED, CORRUPT_SESSION_STATE)
        self._write_and_dead_letter(actions, is_last, new_state, CORRUPT_SESSION_STATE, description)
        return Result(Outcome.DEAD_LETTERED, CORRUPT_SESSION_STATE, description)

    # -- helpers -----------------------------------------------------------------------------

    def _parse(self, body: bytes) -> TaskMessage:
        message = parse_task_message(body)
        if message.pipeline != self.pipeline:
            raise MalformedMessage(
                "pipeline", f"is {message.pipeline!r} but this queue runs {self.pipeline!r}"
            )
        if message.task not in self.tasks:
            known = ", ".join(sorted(self.tasks))
            raise MalformedMessage("task", f"{message.task!r} is not one of {known}")
        return message

    def _dead_letter(
        self,
        incoming: IncomingMessage,
        actions: SessionActions,
        message: TaskMessage,
        new_state: SessionState,
        reason: str,
        description: str,
    ) -> Result:
        self._observe(incoming, message, Outcome.DEAD_LETTERED, reason)
        self._write_and_dead_letter(actions, message.is_last, new_state, reason, description)
        return Result(Outcome.DEAD_LETTERED, reason, description)

    @staticmethod
    def _write_and_dead_letter(
        actions: SessionActions,
        is_last: bool,
        state: SessionState,
        reason: str,
        description: str,
    ) -> None:
        """Write the state, dead-letter, and only then clear the state of a finished session.

        Clearing before the dead-letter would lose the message to a crash in between: its
        redelivery finds no state, which is how a last message that succeeded and cleared the
        state looks (R5), and would be completed. A crash after the dead-letter instead leaves
        the state of a session that has no messages left: harmless, session ids are not reused.
        """
        actions.set_state(state.to_bytes())
        actions.dead_letter(reason, description)
        if is_last:
            actions.set_state(None)

    def _record_failure(
        self, incoming: IncomingMessage, before: SessionState | None, after: SessionState
    ) -> None:
        # Only the first failure: it carries the context a replay needs (order number, total).
        if self._journal is None or after.failure is None:
            return
        if before is not None and before.failure is not None:
            return
        failure = after.failure
        self._journal.record(
            incoming.session_id,
            FailureRecord(
                task=failure.task,
                step=failure.step,
                reason=failure.reason,
                description=failure.description,
                at=failure.at,
                context=dict(after.context),
            ),
        )

    @staticmethod
    def _write(actions: SessionActions, is_last: bool, state: SessionState) -> None:
        # The last message of a session clears the state: finished sessions cost nothing.
        actions.set_state(None if is_last else state.to_bytes())

    def _observe(
        self,
        incoming: IncomingMessage,
        message: TaskMessage | None,
        outcome: Outcome,
        reason: str | None = None,
    ) -> None:
        """Log the decision and tell the observer, before the message is settled: an observer
        that fails leaves the message to be redelivered rather than its outcome unrecorded."""
        if self._observer is not None:
            self._observer(incoming, message, outcome, reason)
        logger.info(
            "session=%s job=%s task=%s step=%s attempt=%d outcome=%s%s",
            incoming.session_id,
            message.job_id if message else "?",
            message.task if message else "?",
            message.step if message else "?",
            incoming.attempt,
            outcome.value,
            f" reason={reason}" if reason else "",
        )
