"""Carrying out the processor's decision about one message, in the order that keeps every
crash point safe: the journal, the session outcomes and the observer are told, the state is
written, and only then is the message settled."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ..domain.archive import FailureRecord
from ..domain.envelope import TaskMessage
from ..domain.errors import PipelineError
from ..domain.session_outcomes import COMPLETED, FAILED, SessionOutcome
from ..domain.session_state import SessionState
from .clock import Clock, utc_now
from .ports import FailureJournal, SessionActions, SessionOutcomes
from .session_messages import BatchObserver, IncomingMessage, Observer, Outcome, Result
from .task_errors import task_error

logger = logging.getLogger("shared.service_layer.processor")


@dataclass(frozen=True)
class Ending:
    """The decision about one message: the state to write first (``None``: leave the state as
    it is), then the settlement (complete, abandon, or dead-letter with ``reason``).
    ``is_last``: the message ends its session. ``first_failure``: ``state`` holds the
    session's first failure, which the journal keeps for a replay. ``retry``: the task failed
    transiently within its window: the state (its attempts) is written, the processor waits
    ``backoff`` seconds holding the session and decides again; only when it cannot wait that
    long is the message handed back (abandoned)."""

    outcome: Outcome
    message: TaskMessage | None
    is_last: bool
    state: SessionState | None = None
    reason: str | None = None
    description: str | None = None
    backoff: float = 0.0
    first_failure: bool = False
    attempt: int | None = None  # the task's attempt, when it ran
    retry: bool = False
    # The session's first failure's reason, when the state that holds it is left as it is.
    session_reason: str | None = None


def left_to_trigger(ending: Ending) -> bool:
    """Whether a trigger that completes what the function leaves unsettled
    (``autoCompleteMessages``) is left this message: a completed task's, not its session's
    last (after the last the processor clears the state, so it completes that one itself)."""
    return ending.outcome is Outcome.COMPLETED and not ending.is_last


# Runs bookkeeping (``work``), trying again while a transient failure lasts and the session
# can be held; returns None once it ran, else the error it gave up on.
Persevere = Callable[[Callable[[], None]], PipelineError | None]


def at_once(work: Callable[[], None]) -> PipelineError | None:
    """Bookkeeping run once: a failure raises."""
    work()
    return None


class SessionEndings:
    def __init__(
        self,
        *,
        journal: FailureJournal | None = None,
        observer: Observer | None = None,
        pipeline: str = "",
        outcomes: SessionOutcomes | None = None,
        clock: Clock = utc_now,
        shows: Sequence[str] = (),
    ) -> None:
        """``shows``: the keys of the session's context recorded with its outcome."""
        self._journal = journal
        self._observer = observer
        self._pipeline = pipeline
        self._outcomes = outcomes
        self._clock = clock
        self._shows = tuple(shows)

    def carry_out(
        self,
        ending: Ending,
        incoming: IncomingMessage,
        actions: SessionActions,
        *,
        had_state: bool = True,
        told: bool = False,
        state_written: bool = False,
        settle: bool = True,
        persevere: Persevere = at_once,
    ) -> Result:
        """Tell, write the state, settle; after a session's last message, clear the state and
        release the session. ``had_state``: the session had a state before this message.
        The telling (journal, session outcome, observer: Table Storage) runs through
        ``persevere``, which waits out a transient failure holding the session: the task is
        not run again for it. When it gives up, the message is handed back with its state
        unwritten (its redelivery runs the task again, which is idempotent).

        The state is cleared only once the last message is settled. A crash before the
        settlement leaves the state that message wrote, so its redelivery finds its own
        outcome there (R4, R16, R22, R23) and never an empty state, which a settled last
        message alone can leave behind (R5). A crash after the settlement leaves a state on a
        session that has no messages left: harmless, session ids are not reused.

        ``told``: ``tell_many`` was called for this message; ``state_written``: its state is
        written already (a batch's held messages, whose last state is written once).
        ``settle`` False: a completed message that is not its session's last is left to the
        trigger, which completes it once the function returns.
        """
        message = ending.message
        result = Result(
            ending.outcome,
            ending.reason,
            ending.description,
            task=message.task if message else None,
            step=message.step if message else None,
            attempt=ending.attempt,
            opens_session=not had_state and ending.state is not None,
            fails_session=ending.first_failure,
            ends_session=ending.is_last and ending.outcome is not Outcome.ABANDONED,
        )
        if ending.outcome is not Outcome.ABANDONED and not told:
            failed = persevere(lambda: self._tell(ending, incoming))
            if failed is not None:
                actions.abandon()
                return replace(
                    result,
                    outcome=Outcome.ABANDONED,
                    reason=task_error(failed).reason,
                    description=f"Handed back, its outcome not recorded: {failed}",
                    fails_session=False,
                    ends_session=False,
                )
        if ending.state is not None and not state_written:
            actions.set_state(ending.state.to_bytes())
        if ending.outcome is Outcome.ABANDONED:
            actions.abandon()
            return result
        if ending.outcome is Outcome.DEAD_LETTERED:
            actions.dead_letter(ending.reason or "", ending.description or "")
        elif settle:
            actions.complete()
        elif ending.is_last:
            raise ValueError("a session's last message is completed by the processor")
        if ending.is_last:
            _after_the_last(actions, incoming)
        return result

    def tell_many(self, endings: Sequence[tuple[Ending, IncomingMessage]]) -> None:
        """``_tell`` for several messages (a batch's held ones), a ``BatchObserver`` told of
        them all in one call. Idempotent, so a caller may run it again after a failure."""
        batched = isinstance(self._observer, BatchObserver)
        for ending, incoming in endings:
            self._tell(ending, incoming, observe=not batched)
        if isinstance(self._observer, BatchObserver):
            self._observer.many(
                [(incoming, e.message, e.outcome, e.reason) for e, incoming in endings]
            )

    def _tell(self, ending: Ending, incoming: IncomingMessage, *, observe: bool = True) -> None:
        """Journal, observer and log, before the message is settled: one that fails leaves the
        message to be redelivered rather than its outcome unrecorded."""
        state = ending.state
        failure = state.failure if state is not None else None
        if self._journal is not None and ending.first_failure and state and failure:
            self._journal.record(
                incoming.session_id,
                FailureRecord(
                    task=failure.task,
                    step=failure.step,
                    reason=failure.reason,
                    description=failure.description,
                    at=failure.at,
                    context=dict(state.context),
                ),
            )
        if self._outcomes is not None and ending.is_last:
            self._record_outcome(ending, incoming)
        if self._observer is not None and observe:
            self._observer(incoming, ending.message, ending.outcome, ending.reason)
        message = ending.message
        logger.info(
            "session=%s job=%s task=%s step=%s outcome=%s%s",
            incoming.session_id,
            message.job_id if message else "?",
            message.task if message else "?",
            message.step if message else "?",
            ending.outcome.value,
            f" reason={ending.reason}" if ending.reason else "",
        )

    def _record_outcome(self, ending: Ending, incoming: IncomingMessage) -> None:
        """How the session ended, at its last message: failed when this message or an
        earlier one was dead-lettered (the first failure's reason), else completed. A
        redelivery of a finished last message records nothing: its first run did."""
        if ending.outcome is Outcome.ALREADY_DONE or self._outcomes is None:
            return
        message = ending.message
        job_id = message.job_id if message else incoming.application_properties.get("job_id")
        if not isinstance(job_id, str) or not job_id:
            return  # a message that names no job cannot be placed
        state = ending.state
        first = (state.failure or state.skipped) if state is not None else None
        failed = first is not None or ending.outcome is Outcome.DEAD_LETTERED
        reason = first.reason if first else ending.session_reason or ending.reason
        context = state.context if state is not None else {}
        self._outcomes.record(
            SessionOutcome(
                job_id=job_id,
                session_id=incoming.session_id,
                pipeline=self._pipeline,
                status=FAILED if failed else COMPLETED,
                at=self._clock().isoformat(),
                reason=reason if failed else None,
                outputs={key: context[key] for key in self._shows if key in context},
            )
        )


def _after_the_last(actions: SessionActions, incoming: IncomingMessage) -> None:
    """Clear the state (a finished session costs nothing) and let the host take the next
    session at once. The message is settled: a failure here changes no outcome, so it is
    logged, not raised. Without the clear the state stays on a session that has no messages;
    without the release the host lets the session go after sessionIdleTimeout."""
    for step, call in (
        ("cleared", lambda: actions.set_state(None)),
        ("released", actions.release_session),
    ):
        try:
            call()
        except Exception as error:
            logger.warning(
                "session=%s could not be %s after its last message (%s: %s)",
                incoming.session_id,
                step,
                type(error).__name__,
                error,
            )
