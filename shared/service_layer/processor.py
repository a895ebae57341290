"""Handle one message of a session: the heart of the pipelines.

Every decision reads the JSON session state first and writes it before the message is
settled, so a crash at any point and the redelivery that follows are safe. The full
behaviour table is in docs/processor.md; each row has a test in tests/unit/test_processor.py.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from ..domain.envelope import TaskMessage, parse_task_message, routing_hint
from ..domain.errors import MalformedMessage, TaskFailed
from ..domain.pipelines import FailurePolicy
from ..domain.reasons import (
    CORRUPT_SESSION_STATE,
    MALFORMED_MESSAGE,
    PREVIOUS_STEP_MISSING,
    SESSION_FAILED,
    UNHANDLED_ERROR,
)
from ..domain.retries import RetryPolicy
from ..domain.session_state import CorruptSessionState, Failure, SessionState, decode_session_state
from .clock import Clock, utc_now
from .pipelines import registry
from .ports import FailureJournal, SessionActions, SessionOutcomes
from .session_endings import Ending, SessionEndings
from .session_messages import (
    BatchTask,
    IncomingMessage,
    Observer,
    Outcome,
    Result,
    Task,
    TaskInvocation,
)

# The processor's vocabulary, importable from here as well as from its own modules.
__all__ = ["FailurePolicy", "IncomingMessage", "Observer", "Outcome", "Result", "RetryPolicy"]
__all__ += ["SessionProcessor", "Task", "TaskInvocation"]

logger = logging.getLogger(__name__)
STOP = FailurePolicy.STOP_ON_FAILURE
UNREADABLE_TASK = "(unreadable message)"


class SessionProcessor:
    def __init__(
        self,
        *,
        pipeline: str,
        tasks: Mapping[str, Task],
        policy: FailurePolicy | None = None,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Clock = utc_now,
        journal: FailureJournal | None = None,
        observer: Observer | None = None,
        outcomes: SessionOutcomes | None = None,
        batch_tasks: Mapping[str, BatchTask] | None = None,
    ) -> None:
        """``policy`` defaults to the pipeline's declared one (``registry``); ``outcomes``
        records how each session ended, at its last message. ``batch_tasks``: every task's
        batch form, for ``handle_batch``."""
        self.pipeline = pipeline
        self.tasks = dict(tasks)
        self.policy = policy or registry().policy(pipeline)
        self.retry = retry or RetryPolicy()
        self.batch_tasks = dict(batch_tasks or {})
        if self.batch_tasks and set(self.batch_tasks) != set(self.tasks):
            # A task without a batch form would run while earlier rows are still held.
            raise ValueError(f"pipeline {pipeline!r}: batch tasks must be given for every task")
        self._clock = clock
        self._endings = SessionEndings(
            sleep=sleep,
            journal=journal,
            observer=observer,
            pipeline=pipeline,
            outcomes=outcomes,
            clock=clock,
        )

    def handle(self, incoming: IncomingMessage, actions: SessionActions) -> Result:
        """Decide, write the state, settle the message through ``actions``."""
        stored = actions.get_state()
        ending = self._decide(incoming, stored)
        return self._endings.carry_out(ending, incoming, actions, had_state=stored is not None)

    def handle_batch(
        self,
        batch: Sequence[tuple[IncomingMessage, SessionActions]],
        *,
        completed_by_trigger: bool = False,
    ) -> list[Result]:
        """The messages of one session's batch, in order, each decided, told and settled as
        ``handle`` would, with fewer requests: the state is read once, and the consecutive
        messages whose task completes are held (their ``BatchTask.prepare`` run, decided on
        the state the earlier ones leave) until a message that does not, or the batch's end.
        Then the held messages' items are written together (``BatchTask.write``), they are
        told (a ``BatchObserver`` in one call), the state the last of them leaves is written
        once, and each is completed. A crash before their state is written runs them again
        (idempotent); after it, their redelivery is R4.

        When ``write`` raises, the held messages are run again one by one through ``handle``
        with the one-message tasks: their retries, attempts and giving up are those of one
        message. Once a message is abandoned for a retry, every later message of the batch
        is abandoned unrun, so that none runs before it. Without ``batch_tasks`` each
        message is run and settled in turn (the state still read once). Returns one result
        per message.

        ``completed_by_trigger``: the trigger completes the messages the function leaves
        unsettled once it returns (a batch trigger with ``autoCompleteMessages``). The
        messages to complete are then left to it, their state written, unless a message of
        the batch ends the session: before its ending clears the state, the ones left so far
        are completed here, so that no message can come back to an empty state."""
        cache = _StateCache()
        results: list[Result | None] = [None] * len(batch)
        held: list[_Held] = []
        left: list[_Held] = []  # completed tasks whose completion is left to the trigger
        stopped = False
        for index, (incoming, actions) in enumerate(batch):
            cached = _CachedState(actions, cache)
            if stopped:
                results[index] = _abandon_unrun(incoming, cached)
                continue
            held_item = self._prepared(index, incoming, cached, held, cache)
            if isinstance(held_item, _Held):
                held.append(held_item)
                continue
            if held:
                fell_back, stopped = self._flush(held, results, left, completed_by_trigger)
                held = []
                if stopped:
                    results[index] = _abandon_unrun(incoming, cached)
                    continue
                if fell_back:  # decided on a state the held messages did not leave
                    held_item = self._prepared(index, incoming, cached, held, cache)
                    if isinstance(held_item, _Held):
                        held.append(held_item)
                        continue
            ending, had_state = held_item
            if ending.is_last:
                self._complete_left(left, results)
            leave = (
                completed_by_trigger and ending.outcome is Outcome.COMPLETED and not ending.is_last
            )
            results[index] = self._endings.carry_out(
                ending, incoming, cached, had_state=had_state, settle=not leave
            )
            if leave:
                left.append(_Held(index, incoming, cached, ending, "", None, had_state))
            stopped = ending.outcome is Outcome.ABANDONED
        if held:
            self._flush(held, results, left, completed_by_trigger)
        return [result for result in results if result is not None]

    def _prepared(
        self,
        index: int,
        incoming: IncomingMessage,
        actions: SessionActions,
        held: list[_Held],
        cache: _StateCache,
    ) -> _Held | tuple[Ending, bool]:
        """The decision about one message of a batch, on the state after the ``held`` ones:
        held itself when its task completes (its item prepared), else the ending and
        whether the session had a state."""
        items: list[tuple[str, Any]] = []
        tasks = self.tasks | {
            name: _preparing(name, batch_task, items)
            for name, batch_task in self.batch_tasks.items()
        }
        # After held messages, the state they leave, as it will be written.
        stored = held[-1].ending.state if held else cache.read(actions)
        had_state, ending = stored is not None, self._decide(incoming, stored, tasks)
        if items and ending.outcome is Outcome.COMPLETED and ending.state is not None:
            name, item = items[0]
            return _Held(index, incoming, actions, ending, name, item, had_state)
        return ending, had_state

    def _flush(
        self,
        held: list[_Held],
        results: list[Result | None],
        left: list[_Held],
        completed_by_trigger: bool,
    ) -> tuple[bool, bool]:
        """Write, tell, write the state, complete the ``held`` messages (``handle_batch``);
        with ``completed_by_trigger`` and none of them the session's last, add them to
        ``left`` instead of completing them. Returns (fell back to one message at a time, a
        message was abandoned)."""
        try:
            for name in dict.fromkeys(h.task for h in held):
                self.batch_tasks[name].write([h.item for h in held if h.task == name])
        except Exception as error:
            logger.warning(
                "A batch of %d messages of session %s could not be written together (%s: %s); "
                "running them one by one",
                len(held),
                held[0].incoming.session_id,
                type(error).__name__,
                error,
            )
            stopped = False
            for h in held:
                if stopped:
                    results[h.index] = _abandon_unrun(h.incoming, h.actions)
                    continue
                if h.ending.is_last:
                    self._complete_left(left, results)
                results[h.index] = result = self.handle(h.incoming, h.actions)
                stopped = result.outcome is Outcome.ABANDONED
            return True, stopped
        self._endings.tell_many([(h.ending, h.incoming) for h in held])
        held[-1].actions.set_state(held[-1].state_bytes)
        last = held[-1] if held[-1].ending.is_last else None
        if completed_by_trigger and last is None:
            for h in held:
                results[h.index] = self._endings.carry_out(
                    h.ending,
                    h.incoming,
                    h.actions,
                    had_state=h.had_state,
                    told=True,
                    state_written=True,
                    settle=False,
                )
            left.extend(held)
            return False, False
        # A session's last message clears the state and lets the session go, so it is
        # settled after all the others.
        self._complete_left(left, results)
        self._complete(held[:-1] if last else held, results)
        if last:
            results[last.index] = self._settled(last)
        return False, False

    def _complete(self, held: Sequence[_Held], results: list[Result | None]) -> None:
        """Complete ``held`` (whose state is written) here, each on its own, at once (each
        is a round trip to the broker)."""
        for h, result in zip(held, _settlements().map(self._settled, held), strict=True):
            results[h.index] = result

    def _complete_left(self, left: list[_Held], results: list[Result | None]) -> None:
        """Complete here the messages left to the trigger so far, and forget them."""
        self._complete(left, results)
        left.clear()

    def _settled(self, h: _Held) -> Result:
        return self._endings.carry_out(
            h.ending, h.incoming, h.actions, had_state=h.had_state, told=True, state_written=True
        )

    # -- decisions ---------------------------------------------------------------------------

    def _decide(
        self,
        incoming: IncomingMessage,
        stored: bytes | SessionState | None,
        tasks: Mapping[str, Task] | None = None,
    ) -> Ending:
        """The ending of one message on the session's ``stored`` state: as Service Bus holds
        it, or decoded already (the state a batch's held messages leave, not yet written)."""
        try:
            state = stored if isinstance(stored, SessionState) else decode_session_state(stored)
        except CorruptSessionState as error:
            return self._corrupt_state(incoming, error)
        try:
            message = self._parse(incoming.body)
        except MalformedMessage as error:
            return self._malformed(incoming, state, error)

        # No state and a step beyond the first: the earlier steps never ran. (Not a last message
        # that ran, cleared the state and crashed: the state is cleared only after the last
        # message is settled, and a settled message does not come back; R5.)
        first_message = state is None
        state = state or SessionState()
        if state.is_failed:
            return self._short_circuit(message, state)
        if message.step < state.next_step:
            skipped = state.skipped_at(message.task, message.step)
            if skipped is not None:
                # ContinueOnFailure: this row was dead-lettered, the state was written, then
                # the dead-letter was lost (a crash in between). Finish it with its own reason.
                return self._dead_letter(message, None, skipped.reason, skipped.description)
            return Ending(Outcome.ALREADY_DONE, message, message.is_last)
        if message.step > state.next_step and self.policy is STOP:
            description = (
                f"Step {message.step} ({message.task}) arrived but step {state.next_step} never "
                "ran: an earlier message of the session is missing (look for it in the "
                "dead-letter queue, e.g. MaxDeliveryCountExceeded), then replay the session."
            )
            if first_message and message.is_last:
                description += (
                    " The session had no state at all: if the job finished before (Service Bus "
                    "delivered its completed last message again), there is nothing to replay."
                )
            failure = self._failure(message.task, message.step, PREVIOUS_STEP_MISSING, description)
            return self._failed(message, message.is_last, state, failure, stop=True)
        attempt = self.retry.attempt(
            state.failed_attempts(message.task, message.step), incoming.delivery_count
        )
        ending = self._run(incoming, message, state, attempt, (tasks or self.tasks)[message.task])
        return replace(ending, attempt=attempt)

    def _run(
        self,
        incoming: IncomingMessage,
        message: TaskMessage,
        state: SessionState,
        attempt: int,
        task: Task,
    ) -> Ending:
        invocation = TaskInvocation(message, incoming.session_id, dict(state.context), attempt)
        try:
            outputs = task(invocation)
        except Exception as error:
            if isinstance(error, TaskFailed):
                reason, description, retryable = error.reason, error.description, error.retryable
            else:  # a bug or an unexpected outage: retried like a transient error
                logger.exception(
                    "Task %s (step %d) of session %s raised %s",
                    message.task,
                    message.step,
                    incoming.session_id,
                    type(error).__name__,
                )
                reason, description = UNHANDLED_ERROR, f"{type(error).__name__}: {error}"
                retryable = True
            if retryable and attempt < self.retry.max_attempts:
                retried = state.after_failed_attempt(message.task, message.step, attempt)
                return self._retry_later(incoming, message, retried, attempt, reason, description)
            if retryable:
                description = f"Gave up after {attempt} attempts. Last error: {description}"
            failure = self._failure(message.task, message.step, reason, description)
            return self._failed(message, message.is_last, state, failure)
        new_state = state.after_success(message.task, message.step, dict(outputs))
        return Ending(Outcome.COMPLETED, message, message.is_last, new_state)

    def _retry_later(
        self,
        incoming: IncomingMessage,
        message: TaskMessage,
        state: SessionState,
        attempt: int,
        reason: str,
        description: str,
    ) -> Ending:
        delay = self.retry.backoff(attempt)
        logger.warning(
            "Task %s of session %s failed (attempt %d of %d): %s; retrying in %.1fs",
            message.task,
            incoming.session_id,
            attempt,
            self.retry.max_attempts,
            reason,
            delay,
        )
        return Ending(Outcome.ABANDONED, message, False, state, reason, description, backoff=delay)

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

    # -- carrying a decision out -------------------------------------------------------------

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


# -- batches ----------------------------------------------------------------------------------


class _StateCache:
    """A batch's session state: read once, then what the batch last wrote."""

    def __init__(self) -> None:
        self.known = False
        self.state: bytes | None = None

    def read(self, actions: SessionActions) -> bytes | None:
        if not self.known:
            self.state, self.known = actions.get_state(), True
        return self.state


class _CachedState:
    """A message's ``SessionActions`` whose state reads come from the batch's ``_StateCache``
    (a session's state changes only through the batch's own writes while it holds the
    session); everything else goes through to ``actions``."""

    def __init__(self, actions: SessionActions, cache: _StateCache) -> None:
        self._actions = actions
        self._cache = cache

    def get_state(self) -> bytes | None:
        return self._cache.read(self._actions)

    def set_state(self, state: bytes | None) -> None:
        self._actions.set_state(state)
        self._cache.state, self._cache.known = state, True

    def complete(self) -> None:
        self._actions.complete()

    def abandon(self) -> None:
        self._actions.abandon()

    def dead_letter(self, reason: str, description: str) -> None:
        self._actions.dead_letter(reason, description)

    def release_session(self) -> None:
        self._actions.release_session()


_SETTLEMENT_THREADS = 16
_settlement_pool: ThreadPoolExecutor | None = None
_settlement_pool_lock = threading.Lock()


def _settlements() -> ThreadPoolExecutor:
    """The threads a batch's settlements run on, made on first use and shared by the
    process's processors."""
    global _settlement_pool
    with _settlement_pool_lock:
        if _settlement_pool is None:
            _settlement_pool = ThreadPoolExecutor(
                max_workers=_SETTLEMENT_THREADS, thread_name_prefix="settlement"
            )
        return _settlement_pool


@dataclass(frozen=True)
class _Held:
    """A batch's message whose task completed, its item not yet written nor it settled."""

    index: int
    incoming: IncomingMessage
    actions: SessionActions
    ending: Ending
    task: str
    item: Any
    had_state: bool

    @property
    def state_bytes(self) -> bytes:
        assert self.ending.state is not None
        return self.ending.state.to_bytes()


def _preparing(name: str, batch_task: BatchTask, items: list[tuple[str, Any]]) -> Task:
    """A task that prepares its item into ``items`` instead of writing it."""

    def prepare(call: TaskInvocation) -> Mapping[str, Any]:
        items.append((name, batch_task.prepare(call)))
        return {}

    return prepare


def _abandon_unrun(incoming: IncomingMessage, actions: SessionActions) -> Result:
    """Hand a message back unrun: an earlier message of its batch is to be retried first."""
    actions.abandon()
    logger.info("session=%s message=%s abandoned unrun", incoming.session_id, incoming.message_id)
    return Result(Outcome.ABANDONED, "RetryingEarlierMessage", "An earlier message is retried")
