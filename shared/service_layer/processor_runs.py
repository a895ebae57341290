"""Running one task for the processor: waiting, holding the session, until the pipeline's
gate lets it run; running it, its success or failure told to the pipeline's circuit; a
transient failure tried again within the retry window, then given up. Part of
``SessionProcessor`` (docs/processor.md, "Waiting out an outage")."""

from __future__ import annotations

import logging
from datetime import datetime

from ..domain.envelope import TaskMessage
from ..domain.session_state import SessionState
from .circuits import PipelineGate
from .holding import Hold
from .processor_failures import FailureEndings
from .session_endings import Ending
from .session_messages import IncomingMessage, Outcome, Task, TaskInvocation
from .task_errors import task_error

logger = logging.getLogger("shared.service_layer.processor")
# How often a waiting session looks whether its pipeline may run again.
GATE_POLL_SECONDS = 1.0


class TaskRuns(FailureEndings):
    """What ``SessionProcessor`` gives a task's run besides ``FailureEndings``: its gate."""

    gate: PipelineGate

    def _admitted(
        self, session_id: str, hold: Hold, state: SessionState, message: TaskMessage
    ) -> bool:
        """Wait, holding the session, until the pipeline's gate lets this session's task run
        (not paused; its circuit closed, or this session the probe). A step whose window has
        run out meanwhile is tried once more, to give up on a fresh answer. False when the
        hold cannot wait any longer: the message is handed back unrun."""
        since = state.retrying_since(message.task, message.step)
        deadline = self.retry.deadline(datetime.fromisoformat(since)) if since else None
        while not self.gate.admit(session_id):
            if deadline is not None and self._clock() >= deadline:
                return True
            if not hold.wait(GATE_POLL_SECONDS, until=lambda: self.gate.admit(session_id)):
                return False
        return True

    def _run(
        self,
        incoming: IncomingMessage,
        message: TaskMessage,
        state: SessionState,
        attempt: int,
        task: Task,
        *,
        reports: bool = True,
    ) -> Ending:
        """Run the task; its success or failure is told to the pipeline's circuit
        (``reports``: a success says the dependencies answered)."""
        invocation = TaskInvocation(message, incoming.session_id, dict(state.context), attempt)
        circuit = self.gate.circuit
        try:
            outputs = task(invocation)
        except Exception as error:
            failed = task_error(error)
            if not failed.expected:
                logger.exception(
                    "Task %s (step %d) of session %s raised %s",
                    message.task,
                    message.step,
                    incoming.session_id,
                    type(error).__name__,
                )
            description = failed.description
            if not failed.retryable:
                circuit.succeeded(incoming.session_id)  # the task's own failure: answered
            else:
                circuit.failed(incoming.session_id, failed.dependency)
                now = self._clock()
                since = state.retrying_since(message.task, message.step) or now.isoformat()
                if not self.retry.gives_up(datetime.fromisoformat(since), now):
                    retried = state.after_failed_attempt(
                        message.task, message.step, attempt, now.isoformat()
                    )
                    return self._retry_later(incoming, message, retried, attempt, failed.reason)
                description = self._given_up(failed.dependency, since, now, attempt, description)
            failure = self._failure(message.task, message.step, failed.reason, description)
            return self._failed(message, message.is_last, state, failure)
        if reports:
            circuit.succeeded(incoming.session_id)
        new_state = state.after_success(message.task, message.step, dict(outputs))
        return Ending(Outcome.COMPLETED, message, message.is_last, new_state)

    def _retry_later(
        self,
        incoming: IncomingMessage,
        message: TaskMessage,
        state: SessionState,
        attempt: int,
        reason: str,
    ) -> Ending:
        delay = self.retry.backoff(attempt)
        logger.warning(
            "Task %s of session %s failed (attempt %d): %s; retrying in %.1fs",
            message.task,
            incoming.session_id,
            attempt,
            reason,
            delay,
        )
        description = f"Retrying after {attempt} failed attempts (window {self.retry.window:g} s)"
        return Ending(
            Outcome.ABANDONED,
            message,
            False,
            state,
            reason,
            description,
            backoff=delay,
            retry=True,
        )
