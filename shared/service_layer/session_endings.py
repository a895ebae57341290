"""Carrying out the processor's decision about one message, in the order that keeps every
crash point safe: the observer and the journal are told, the state is written, and only then
is the message settled."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from ..domain.archive import FailureRecord
from ..domain.envelope import TaskMessage
from ..domain.session_state import SessionState
from .ports import FailureJournal, SessionActions
from .session_messages import IncomingMessage, Observer, Outcome, Result

logger = logging.getLogger("shared.service_layer.processor")


@dataclass(frozen=True)
class Ending:
    """The decision about one message: the state to write first (``None``: leave the state as
    it is), then the settlement (complete, abandon after ``backoff`` seconds, or dead-letter
    with ``reason``). ``is_last``: the message ends its session. ``first_failure``: ``state``
    holds the session's first failure, which the journal keeps for a replay."""

    outcome: Outcome
    message: TaskMessage | None
    is_last: bool
    state: SessionState | None = None
    reason: str | None = None
    description: str | None = None
    backoff: float = 0.0
    first_failure: bool = False


class SessionEndings:
    def __init__(
        self,
        *,
        sleep: Callable[[float], None],
        journal: FailureJournal | None = None,
        observer: Observer | None = None,
    ) -> None:
        self._sleep = sleep
        self._journal = journal
        self._observer = observer

    def carry_out(
        self, ending: Ending, incoming: IncomingMessage, actions: SessionActions
    ) -> Result:
        """Tell, write the state, settle; after a session's last message, release the session.

        A dead-lettered last message clears the state only after the dead-letter: cleared
        first, a crash in between would leave a redelivery that finds no state, which is how a
        last message that succeeded looks (R5), and it would be completed. A crash after the
        dead-letter leaves the state of a session that has no messages left: harmless, session
        ids are not reused.
        """
        result = Result(ending.outcome, ending.reason, ending.description)
        if ending.outcome is Outcome.ABANDONED:
            self._sleep(ending.backoff)
            actions.abandon()
            return result
        self._tell(ending, incoming)
        if ending.outcome is Outcome.DEAD_LETTERED:
            if ending.state is not None:
                actions.set_state(ending.state.to_bytes())
            actions.dead_letter(ending.reason or "", ending.description or "")
            if ending.is_last:
                actions.set_state(None)
        else:
            if ending.state is not None:
                # The last message of a session clears the state: finished sessions cost nothing.
                actions.set_state(None if ending.is_last else ending.state.to_bytes())
            actions.complete()
        if ending.is_last:
            _release(actions, incoming)
        return result

    def _tell(self, ending: Ending, incoming: IncomingMessage) -> None:
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
        if self._observer is not None:
            self._observer(incoming, ending.message, ending.outcome, ending.reason)
        message = ending.message
        logger.info(
            "session=%s job=%s task=%s step=%s attempt=%d outcome=%s%s",
            incoming.session_id,
            message.job_id if message else "?",
            message.task if message else "?",
            message.step if message else "?",
            incoming.attempt,
            ending.outcome.value,
            f" reason={ending.reason}" if ending.reason else "",
        )


def _release(actions: SessionActions, incoming: IncomingMessage) -> None:
    """The message is settled, so a failure here changes no outcome: the host then keeps the
    session until sessionIdleTimeout, which costs time, not correctness."""
    try:
        actions.release_session()
    except Exception as error:
        logger.warning(
            "session=%s could not be released (%s: %s); the host lets it go after "
            "sessionIdleTimeout",
            incoming.session_id,
            type(error).__name__,
            error,
        )
