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
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..domain.errors import PipelineError
from .ports import SessionActions
from .session_batch_parts import (
    CachedState,
    Held,
    StateCache,
    hand_back_unrun,
    preparing,
    settlements,
)
from .session_endings import Ending, left_to_trigger
from .session_messages import BatchTask, IncomingMessage, Outcome, Result, Task

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
        self._cache = StateCache()
        self._results: list[Result | None] = []
        self._left: list[Held] = []  # completed, their completion left to the trigger

    def run(self, batch: Sequence[tuple[IncomingMessage, SessionActions]]) -> list[Result]:
        if not batch:
            return []
        self._results = [None] * len(batch)
        session_id = batch[0][0].session_id
        steady = [(incoming, self._p.steady(actions, session_id)) for incoming, actions in batch]
        self._run(steady, self._p.hold(steady[0][1]))
        return [result for result in self._results if result is not None]

    def _run(self, batch: Sequence[tuple[IncomingMessage, SessionActions]], hold: Hold) -> None:
        held: list[Held] = []
        stopped = False
        for index, (incoming, actions) in enumerate(batch):
            cached = CachedState(actions, self._cache)
            if stopped:
                self._results[index] = hand_back_unrun(incoming, cached)
                continue
            decided = self._prepared(index, incoming, cached, held, hold)
            if isinstance(decided, Held):
                held.append(decided)
                continue
            if held:
                fell_back, stopped = self._flush(held, hold)
                held = []
                if stopped:
                    self._results[index] = hand_back_unrun(incoming, cached)
                    continue
                if fell_back:  # decided on a state the held messages did not leave
                    decided = self._prepared(index, incoming, cached, held, hold)
                    if isinstance(decided, Held):
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
        leave = self._completed_by_trigger and left_to_trigger(ending)
        result = self._p.carry_out(
            ending, incoming, actions, had_state=had_state, hold=hold, settle=not leave
        )
        self._results[index] = result
        if leave and result.outcome is Outcome.COMPLETED:
            self._left.append(Held(index, incoming, actions, ending, "", None, had_state))
        return result.outcome is Outcome.ABANDONED

    def _prepared(
        self,
        index: int,
        incoming: IncomingMessage,
        actions: SessionActions,
        held: list[Held],
        hold: Hold,
    ) -> Held | tuple[Ending, bool]:
        """The decision about one message of a batch, on the state after the ``held`` ones:
        held itself when its task completes (its item prepared), else the ending and
        whether the session had a state."""
        items: list[tuple[str, Any]] = []
        tasks = self._p.tasks | {
            name: preparing(name, batch_task, items)
            for name, batch_task in self._p.batch_tasks.items()
        }
        # After held messages, the state they leave, as it will be written.
        stored = held[-1].ending.state if held else self._cache.read(actions)
        had_state = stored is not None
        ending = self._p.decide(incoming, stored, hold, tasks, prepared=bool(self._p.batch_tasks))
        if items and ending.outcome is Outcome.COMPLETED and ending.state is not None:
            name, item = items[0]
            return Held(index, incoming, actions, ending, name, item, had_state)
        return ending, had_state

    def _flush(self, held: list[Held], hold: Hold) -> tuple[bool, bool]:
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
                self._results[h.index] = hand_back_unrun(h.incoming, h.actions)
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

    def _one_by_one(self, held: list[Held], hold: Hold) -> bool:
        """The held messages again, each as one message with its one-message task (their
        retries and giving up are those of one message). True when one was handed back."""
        stopped = False
        for h in held:
            if stopped:
                self._results[h.index] = hand_back_unrun(h.incoming, h.actions)
                continue
            if h.ending.is_last:
                self._complete_left()
            stored = h.actions.get_state()
            self._results[h.index] = result = self._p.settle(h.incoming, h.actions, stored, hold)
            stopped = result.outcome is Outcome.ABANDONED
        return stopped

    def _complete(self, held: Sequence[Held]) -> None:
        """Complete ``held`` (whose state is written) here, each on its own, at once (each
        is a round trip to the broker)."""
        for h, result in zip(held, settlements().map(self._settled, held), strict=True):
            self._results[h.index] = result

    def _complete_left(self) -> None:
        """Complete here the messages left to the trigger so far, and forget them."""
        self._complete(self._left)
        self._left.clear()

    def _settled(self, h: Held) -> Result:
        return self._p.endings.carry_out(
            h.ending, h.incoming, h.actions, had_state=h.had_state, told=True, state_written=True
        )
