"""The processor's endings for a message that fails or cannot run: dead-lettered with its
reason, and what that does to the session (failed under stop-on-failure, gone past under
continue-on-failure); a session already failed, a message that cannot be read, a state that
cannot be read. Part of ``SessionProcessor`` (docs/processor.md's behaviour table)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from ..domain.envelope import TaskMessage, parse_task_message, routing_hint
from ..domain.errors import MalformedMessage
from ..domain.pipelines import FailurePolicy
from ..domain.reasons import CORRUPT_SESSION_STATE, MALFORMED_MESSAGE, SESSION_FAILED
from ..domain.retries import RetryPolicy
from ..domain.session_state import CorruptSessionState, Failure, SessionState
from .clock import Clock
from .session_endings import Ending
from .session_messages import IncomingMessage, Outcome, Task

STOP = FailurePolicy.STOP_ON_FAILURE
UNREADABLE_TASK = "(unreadable message)"


class FailureEndings:
    """What ``SessionProcessor`` gives these endings: its pipeline, tasks, policy, retry
    window and clock."""

    pipeline: str
    tasks: dict[str, Task]
    policy: FailurePolicy
    retry: RetryPolicy
    _clock: Clock

    def _given_up(
        self, dependency: str | None, since: str, now: datetime, attempts: int, last: str
    ) -> str:
        what = f"{dependency} was out of reach" if dependency else "the task kept failing"
        elapsed = (now - datetime.fromisoformat(since)).total_seconds()
        return (
            f"Gave up: {what} for {elapsed:.0f} s, since {since} ({attempts} attempts; the "
            f"retry window is {self.retry.window:g} s). Last error: {last} Replay the session "
            "once it is back."
        )

    def _failure(self, task: str, step: int | None, reason: str, description: str) -> Failure:
        return Failure(task, step, reason, description, self._clock().isoformat())

    def _failed(
        self,
        message: TaskMessage | None,
        is_last: bool,
        state: SessionState,
        failure: Failure,
        *,
        stop: bool | None = None,
    ) -> Ending:
        """Dead-letter the message with ``failure`` and write what it does to the session:
        under StopOnFailure (``stop``, by default the processor's policy) the session is
        failed, under ContinueOnFailure the session goes on past the step."""
        if stop is None:
            stop = self.policy is STOP
        new_state = state.mark_failed(failure) if stop else state.after_skipped_failure(failure)
        return Ending(
            Outcome.DEAD_LETTERED,
            message,
            is_last,
            new_state,
            failure.reason,
            failure.description,
            first_failure=stop and state.failure is None,
        )

    def _short_circuit(self, message: TaskMessage, state: SessionState) -> Ending:
        failure = state.failure
        if failure is not None and failure.step == message.step and failure.task == message.task:
            # The failing message itself, redelivered after its state was written: finish
            # dead-lettering it with its own reason.
            return self._dead_letter(message, None, failure.reason, failure.description)
        if failure is None:
            description = "Not run: the session was marked failed earlier."
        else:
            description = (
                f"Not run: the session failed at step {failure.step} ({failure.task}) "
                f"with {failure.reason}: {failure.description}"
            )
        ending = self._dead_letter(message, None, SESSION_FAILED, description)
        return replace(ending, session_reason=failure.reason if failure else None)

    def _malformed(
        self, incoming: IncomingMessage, state: SessionState | None, error: MalformedMessage
    ) -> Ending:
        step, is_last = routing_hint(incoming.application_properties)
        description = f"The message cannot be read: {error}. Fix the sender; nothing was run."
        failure = self._failure(UNREADABLE_TASK, step, MALFORMED_MESSAGE, description)
        return self._failed(None, is_last, state or SessionState(), failure)

    def _corrupt_state(self, incoming: IncomingMessage, error: CorruptSessionState) -> Ending:
        try:
            message: TaskMessage | None = self._parse(incoming.body)
        except MalformedMessage:
            message = None
        hint_step, hint_last = routing_hint(incoming.application_properties)
        description = (
            f"The session state could not be read ({error}); the session is treated as "
            "failed so that nothing runs out of order. Replay it from the archive."
        )
        failure = self._failure(
            message.task if message else "(unknown)",
            message.step if message else hint_step,
            CORRUPT_SESSION_STATE,
            description,
        )
        is_last = message.is_last if message else hint_last
        return self._failed(message, is_last, SessionState(), failure, stop=True)

    @staticmethod
    def _dead_letter(
        message: TaskMessage, state: SessionState | None, reason: str, description: str
    ) -> Ending:
        """``state`` ``None``: the state stays as it is, and is not written again."""
        return Ending(Outcome.DEAD_LETTERED, message, message.is_last, state, reason, description)

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
