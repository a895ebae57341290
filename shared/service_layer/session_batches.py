"""A session's batch of messages through the processor's decisions, with fewer requests than
one message at a time (docs/processor.md, "Batches").

The state is read once per batch. Consecutive messages whose task succeeds are **held**: their
``BatchTask.prepare`` ran, nothing is written or settled yet. At the first message that does
not succeed, or at the batch's end, the held messages' items are written together
(``BatchTask.write``), they are told, the state the last of them leaves is written once, and
each is completed (or left to the trigger to complete). Every other message is decided and
carried out as one message is (``SessionProcessor.resolve``), its transient failures waited
out holding the session, like the rest of the batch behind it: nothing behind a retried
message is handed back while the session can be held. Once a message is handed back, every
later one is handed back unrun, so that none runs before it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..domain.errors import PipelineError
from ..domain.reasons import EARLIER_MESSAGE_HANDED_BACK
from .ports import SessionActions
from .session_endings import Ending
from .session_messages import BatchTask, IncomingMessage, Outcome, Result, Task, TaskInvocation

if TYPE_CHECKING:
    from ..domain.session_state import SessionState
    from .circuits import PipelineGate

    Stored = bytes | SessionState | None
    from .holding import Hold
    from .session_endings import SessionEndings

logger = logging.getLogger("shared.service_layer.processor")


class Decisions(Protocol):
    """What a batch needs of the session processor (``SessionProcessor``)."""

    tasks: dict[str, Task]
    batch_tasks: dict[str, BatchTask]
    gate: PipelineGate
    endings: SessionEndings

    def hold(self, actions: SessionActions) -> Hold: ...

    def steady(self, actions: SessionActions, session_id: str) -> SessionActions: ...

    def decide(
        self,
        incoming: IncomingMessage,
        stored: Stored,
        hold: Hold,
        tasks: Mapping[str, Task] | None = None,
        *,
        prepared: bool = False,
    ) -> Ending: ...

    def resolve(
        self,
        incoming: IncomingMessage,
        actions: SessionActions,
        stored: Stored,
        hold: Hold,
        *,
        first: Ending | None = None,
    ) -> Ending: ...

    def settle(
        self, incoming: IncomingMessage, actions: SessionActions, stored: Stored, hold: Hold
    ) -> Result: ...

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
    ) -> Result: ...

    def persevere(
        self, work: Callable[[], None], session_id: str, hold: Hold
    ) -> PipelineError | None: ...


class BatchRun:
    """One batch: ``run`` returns one result per message, in order.

    ``completed_by_trigger``: the trigger completes the messages the function leaves
    unsettled once it returns (a batch trigger with ``autoCompleteMessages``). The messages
    to complete are then left to it, their state written, unless a message of the batch ends
    the session: before its ending clears the state, the ones left so far are completed
    here, so that no message can come back to an empty state."""

    def __init__(self, processor: Decisions, *, completed_by_trigger: bool) -> None:
        self._p = processor
        self._completed_by_trigger = completed_by_trigger
        self._cache = _StateCache()
        self._results: list[Result | None] = []
        self._left: list[_Held] = []  # completed, their completion left to the trigger

    def run(self, batch: Sequence[tuple[IncomingMessage, SessionActions]]) -> list[Result]:
        if not batch:
            return []
        self._results = [None] * len(batch)
        session_id = batch[0][0].session_id
        steady = [(incoming, self._p.steady(actions, session_id)) for incoming, actions in batch]
        self._run(steady, self._p.hold(steady[0][1]))
        return [result for result in self._results if result is not None]

    def _run(self, batch: Sequence[tuple[IncomingMessage, SessionActions]], hold: Hold) -> None:
        held: list[_Held] = []
        stopped = False
        for index, (incoming, actions) in enumerate(batch):
            cached = _CachedState(actions, self._cache)
            if stopped:
                self._results[index] = _hand_back_unrun(incoming, cached)
                continue
            decided = self._prepared(index, incoming, cached, held, hold)
            if isinstance(decided, _Held):
                held.append(decided)
                continue
            if held:
                fell_back, stopped = self._flush(held, hold)
                held = []
                if stopped:
                    self._results[index] = _hand_back_unrun(incoming, cached)
                    continue
                if fell_back:  # decided on a state the held messages did not leave
                    decided = self._prepared(index, incoming, cached, held, hold)
                    if isinstance(decided, _Held):
                        held.append(decided)
                        continue
            ending, had_state = decided
            ending = self._p.resolve(incoming, cached, None, hold, first=ending)
            stopped = self._carry_out(index, incoming, cached, ending, had_state, hold)
        if held:
            self._flush(held, hold)

    def _carry_out(
        self,
        index: int,
        incoming: IncomingMessage,
        actions: SessionActions,
        ending: Ending,
        had_state: bool,
        hold: Hold,
    ) -> bool:
        """Carry out one message's ending; True when it was handed back."""
        if ending.is_last:
            self._complete_left()
        leave = (
            self._completed_by_trigger
            and ending.outcome is Outcome.COMPLETED
            and not ending.is_last
        )
        result = self._p.carry_out(
            ending, incoming, actions, had_state=had_state, hold=hold, settle=not leave
        )
        self._results[index] = result
        if leave and result.outcome is Outcome.COMPLETED:
            self._left.append(_Held(index, incoming, actions, ending, "", None, had_state))
        return result.outcome is Outcome.ABANDONED

    def _prepared(
        self,
        index: int,
        incoming: IncomingMessage,
        actions: SessionActions,
        held: list[_Held],
        hold: Hold,
    ) -> _Held | tuple[Ending, bool]:
        """The decision about one message of a batch, on the state after the ``held`` ones:
        held itself when its task completes (its item prepared), else the ending and
        whether the session had a state."""
        items: list[tuple[str, Any]] = []
        tasks = self._p.tasks | {
            name: _preparing(name, batch_task, items)
            for name, batch_task in self._p.batch_tasks.items()
        }
        # After held messages, the state they leave, as it will be written.
        stored = held[-1].ending.state if held else self._cache.read(actions)
        had_state = stored is not None
        ending = self._p.decide(incoming, stored, hold, tasks, prepared=bool(self._p.batch_tasks))
        if items and ending.outcome is Outcome.COMPLETED and ending.state is not None:
            name, item = items[0]
            return _Held(index, incoming, actions, ending, name, item, had_state)
        return ending, had_state

    def _flush(self, held: list[_Held], hold: Hold) -> tuple[bool, bool]:
        """Write, tell, write the state, complete the ``held`` messages; with
        ``completed_by_trigger`` and none of them the session's last, leave them to the
        trigger instead of completing them. Returns (fell back to one message at a time, a
        message was handed back)."""
        try:
            for name in dict.fromkeys(h.task for h in held):
                self._p.batch_tasks[name].write([h.item for h in held if h.task == name])
        except Exception as error:
            logger.warning(
                "A batch of %d messages of session %s could not be written together (%s: %s); "
                "running them one by one",
                len(held),
                held[0].incoming.session_id,
                type(error).__name__,
                error,
            )
            return True, self._one_by_one(held, hold)
        self._p.gate.circuit.succeeded(held[0].incoming.session_id)
        session_id = held[0].incoming.session_id
        failed = self._p.persevere(
            lambda: self._p.endings.tell_many([(h.ending, h.incoming) for h in held]),
            session_id,
            hold,
        )
        if failed is not None:
            for h in held:
                self._results[h.index] = _hand_back_unrun(h.incoming, h.actions)
            return False, True
        assert held[-1].ending.state is not None
        held[-1].actions.set_state(held[-1].ending.state.to_bytes())
        last = held[-1] if held[-1].ending.is_last else None
        if self._completed_by_trigger and last is None:
            for h in held:
                self._results[h.index] = self._p.carry_out(
                    h.ending,
                    h.incoming,
                    h.actions,
                    had_state=h.had_state,
                    hold=hold,
                    told=True,
                    state_written=True,
                    settle=False,
                )
            self._left.extend(held)
            return False, False
        # A session's last message clears the state and lets the session go, so it is
        # settled after all the others.
        self._complete_left()
        self._complete(held[:-1] if last else held)
        if last:
            self._results[last.index] = self._settled(last)
        return False, False

    def _one_by_one(self, held: list[_Held], hold: Hold) -> bool:
        """The held messages again, each as one message with its one-message task (their
        retries and giving up are those of one message). True when one was handed back."""
        stopped = False
        for h in held:
            if stopped:
                self._results[h.index] = _hand_back_unrun(h.incoming, h.actions)
                continue
            if h.ending.is_last:
                self._complete_left()
            stored = h.actions.get_state()
            self._results[h.index] = result = self._p.settle(h.incoming, h.actions, stored, hold)
            stopped = result.outcome is Outcome.ABANDONED
        return stopped

    def _complete(self, held: Sequence[_Held]) -> None:
        """Complete ``held`` (whose state is written) here, each on its own, at once (each
        is a round trip to the broker)."""
        for h, result in zip(held, _settlements().map(self._settled, held), strict=True):
            self._results[h.index] = result

    def _complete_left(self) -> None:
        """Complete here the messages left to the trigger so far, and forget them."""
        self._complete(self._left)
        self._left.clear()

    def _settled(self, h: _Held) -> Result:
        return self._p.endings.carry_out(
            h.ending, h.incoming, h.actions, had_state=h.had_state, told=True, state_written=True
        )


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

    def renew_lock(self) -> Any:
        return self._actions.renew_lock()


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
    """A batch's message whose task completed, its item not yet written nor it settled (or,
    with no task or item, a completed message whose completion is left to the trigger)."""

    index: int
    incoming: IncomingMessage
    actions: SessionActions
    ending: Ending
    task: str
    item: Any
    had_state: bool


def _preparing(name: str, batch_task: BatchTask, items: list[tuple[str, Any]]) -> Task:
    """A task that prepares its item into ``items`` instead of writing it."""

    def prepare(call: TaskInvocation) -> dict[str, Any]:
        items.append((name, batch_task.prepare(call)))
        return {}

    return prepare


def _hand_back_unrun(incoming: IncomingMessage, actions: SessionActions) -> Result:
    """Hand a message back unrun: an earlier message of its batch was handed back."""
    actions.abandon()
    logger.info("session=%s message=%s handed back unrun", incoming.session_id, incoming.message_id)
    return Result(
        Outcome.ABANDONED, EARLIER_MESSAGE_HANDED_BACK, "An earlier message was handed back"
    )
