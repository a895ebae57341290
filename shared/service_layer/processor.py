"""Handle one message of a session: the heart of the pipelines.

Every decision reads the JSON session state first and writes it before the message is
settled, so a crash at any point and the redelivery that follows are safe. A transient failure
is waited out inside the invocation, holding the session (``holding``), for as long as the
pipeline's retry window; so is a paused pipeline or an open circuit (``circuits``). The full
behaviour table is in docs/processor.md; each row has a test in tests/unit/test_processor.py.
A session's batch of messages is run by ``session_batches``, on the same decisions.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from ..domain.errors import MalformedMessage, PipelineError
from ..domain.pipelines import FailurePolicy
from ..domain.reasons import (
    PIPELINE_PAUSED,
    PREVIOUS_STEP_MISSING,
)
from ..domain.retries import DEFAULT_HOLD_SECONDS, RetryPolicy
from ..domain.session_state import CorruptSessionState, SessionState, decode_session_state
from .circuits import Circuit, PipelineGate
from .clock import Clock, utc_now
from .holding import Hold, SteadyActions
from .ports import FailureJournal, SessionActions, SessionOutcomes
from .processor_failures import STOP
from .processor_runs import TaskRuns
from .session_batches import BatchRun
from .session_endings import Ending, SessionEndings, left_to_trigger
from .session_messages import (
    BatchTask,
    IncomingMessage,
    Observer,
    Outcome,
    Result,
    Task,
    TaskInvocation,
)
from .task_errors import task_error

# The processor's vocabulary, importable from here as well as from its own modules.
__all__ = ["FailurePolicy", "IncomingMessage", "Observer", "Outcome", "Result", "RetryPolicy"]
__all__ += ["SessionProcessor", "Task", "TaskInvocation"]

logger = logging.getLogger(__name__)


class SessionProcessor(TaskRuns):
    def __init__(
        self,
        *,
        pipeline: str,
        tasks: Mapping[str, Task],
        policy: FailurePolicy,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Clock = utc_now,
        monotonic: Callable[[], float] = time.monotonic,
        journal: FailureJournal | None = None,
        observer: Observer | None = None,
        outcomes: SessionOutcomes | None = None,
        batch_tasks: Mapping[str, BatchTask] | None = None,
        gate: PipelineGate | None = None,
        hold_seconds: float = DEFAULT_HOLD_SECONDS,
        shows: Sequence[str] = (),
    ) -> None:
        """``policy``: the pipeline's declared one; ``outcomes`` records how each session
        ended, at its last message, with the outputs of the context named in ``shows``.
        ``batch_tasks``: every task's batch form, for ``handle_batch``. ``gate``: the
        pipeline's pause and circuit (by default a circuit of its own and no manual pause);
        ``hold_seconds``: how long one invocation may hold its session while it waits."""
        self.pipeline = pipeline
        self.tasks = dict(tasks)
        self.policy = policy
        self.retry = retry or RetryPolicy()
        self.batch_tasks = dict(batch_tasks or {})
        if self.batch_tasks and set(self.batch_tasks) != set(self.tasks):
            # A task without a batch form would run while earlier rows are still held.
            raise ValueError(f"pipeline {pipeline!r}: batch tasks must be given for every task")
        self._sleep = sleep
        self._clock = clock
        self._monotonic = monotonic
        self._hold_seconds = hold_seconds
        self.gate = gate or PipelineGate(
            Circuit(pipeline, probes=self.retry, clock=clock, monotonic=monotonic),
            monotonic=monotonic,
        )
        self.endings = SessionEndings(
            journal=journal,
            observer=observer,
            pipeline=pipeline,
            outcomes=outcomes,
            clock=clock,
            shows=shows,
        )

    def handle(
        self,
        incoming: IncomingMessage,
        actions: SessionActions,
        *,
        completed_by_trigger: bool = False,
    ) -> Result:
        """Decide, write the state, settle the message through ``actions``.
        ``completed_by_trigger``: the trigger completes the message once the function returns
        (``autoCompleteMessages``), so a completed task's message that is not its session's
        last is left to it; every other ending is settled here."""
        steady = self.steady(actions, incoming.session_id)
        return self.settle(
            incoming,
            steady,
            steady.get_state(),
            self.hold(steady),
            completed_by_trigger=completed_by_trigger,
        )

    def handle_batch(
        self,
        batch: Sequence[tuple[IncomingMessage, SessionActions]],
        *,
        completed_by_trigger: bool = False,
    ) -> list[Result]:
        """The messages of one session's batch, in order, each decided and settled as
        ``handle`` would, with fewer requests (``session_batches``)."""
        return BatchRun(self, completed_by_trigger=completed_by_trigger).run(batch)

    def hold(self, actions: SessionActions) -> Hold:
        """The hold of an invocation starting now."""
        return Hold(
            actions, budget=self._hold_seconds, sleep=self._sleep, monotonic=self._monotonic
        )

    def steady(self, actions: SessionActions, session_id: str) -> SessionActions:
        """``actions`` whose requests ride through a Service Bus blip, each failure told to
        the circuit (``SteadyActions``); past it, the invocation fails and the message comes
        back."""

        def failed(dependency: str) -> None:
            self.gate.circuit.failed(session_id, dependency)

        return SteadyActions(
            actions,
            failed=failed,
            reached=self.gate.circuit.reached,
            backoff=self.retry.backoff,
            sleep=self._sleep,
            monotonic=self._monotonic,
        )

    def settle(
        self,
        incoming: IncomingMessage,
        actions: SessionActions,
        stored: bytes | SessionState | None,
        hold: Hold,
        *,
        completed_by_trigger: bool = False,
    ) -> Result:
        """One message on the session's ``stored`` state, decided, retried while its task
        fails transiently within the window and the session can be held, then carried out
        (its completion left to the trigger as ``handle`` says)."""
        ending = self.resolve(incoming, actions, stored, hold)
        return self.carry_out(
            ending,
            incoming,
            actions,
            had_state=stored is not None,
            hold=hold,
            settle=not (completed_by_trigger and left_to_trigger(ending)),
        )

    def resolve(
        self,
        incoming: IncomingMessage,
        actions: SessionActions,
        stored: bytes | SessionState | None,
        hold: Hold,
        *,
        first: Ending | None = None,
    ) -> Ending:
        """The final decision about one message (``first``: decided already): while its
        task fails transiently within the window, the state (its attempts) is written, the
        backoff waited holding the session, and the message decided again. When the hold
        cannot wait the backoff, the message is to be handed back (its state written)."""
        ending = first or self.decide(incoming, stored, hold)
        while ending.retry:
            assert ending.state is not None
            # Before the wait: a crash keeps the attempt and the window's start.
            actions.set_state(ending.state.to_bytes())
            if not hold.wait(ending.backoff):
                return replace(ending, retry=False, state=None)  # written already
            ending = self.decide(incoming, ending.state, hold)
        return ending

    def carry_out(
        self,
        ending: Ending,
        incoming: IncomingMessage,
        actions: SessionActions,
        *,
        had_state: bool,
        hold: Hold,
        settle: bool = True,
        told: bool = False,
        state_written: bool = False,
    ) -> Result:
        """``SessionEndings.carry_out``, its bookkeeping persevering while the hold lasts."""
        return self.endings.carry_out(
            ending,
            incoming,
            actions,
            had_state=had_state,
            told=told,
            state_written=state_written,
            settle=settle,
            persevere=lambda work: self.persevere(work, incoming.session_id, hold),
        )

    def persevere(
        self, work: Callable[[], None], session_id: str, hold: Hold
    ) -> PipelineError | None:
        """Run bookkeeping (``work``), trying again after each transient failure, its backoff
        waited holding the session. Returns the error it gave up on once the hold cannot wait
        the next backoff."""
        failures = 0
        while True:
            try:
                work()
                return None
            except PipelineError as error:
                if not error.retryable:
                    raise
                failures += 1
                self.gate.circuit.failed(session_id, task_error(error).dependency)
                logger.warning(
                    "session=%s outcome not recorded (%s); trying again, holding the session",
                    session_id,
                    error,
                )
                if not hold.wait(self.retry.backoff(failures)):
                    return error

    # -- decisions ---------------------------------------------------------------------------

    def decide(
        self,
        incoming: IncomingMessage,
        stored: bytes | SessionState | None,
        hold: Hold,
        tasks: Mapping[str, Task] | None = None,
        *,
        prepared: bool = False,
    ) -> Ending:
        """The ending of one message on the session's ``stored`` state: as Service Bus holds
        it, or decoded already (the state the processor itself just wrote, or that a batch's
        held messages leave). Runs the task when the state says so, once its pipeline may run
        (waiting, holding the session, while it is paused). ``prepared``: ``tasks`` only
        prepare what a batch writes later, so their success says nothing of the
        dependencies (the batch's write tells the circuit)."""
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
        if not self._admitted(incoming.session_id, hold, state, message):
            paused = self.gate.paused()
            description = (
                f"Handed back unrun: the pipeline is paused ({paused.summary})."
                if paused is not None
                else "Handed back unrun."
            )
            return Ending(Outcome.ABANDONED, message, False, None, PIPELINE_PAUSED, description)
        attempt = state.failed_attempts(message.task, message.step) + 1
        task = (tasks or self.tasks)[message.task]
        ending = self._run(incoming, message, state, attempt, task, reports=not prepared)
        return replace(ending, attempt=attempt)
