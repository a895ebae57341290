"""What a batch run (``session_batches``) keeps while it runs: the session state read once,
the messages held until their items are written, the threads their settlements run on."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..domain.reasons import EARLIER_MESSAGE_HANDED_BACK
from .ports import SessionActions
from .session_endings import Ending
from .session_messages import BatchTask, IncomingMessage, Outcome, Result, Task, TaskInvocation

logger = logging.getLogger("shared.service_layer.processor")


class StateCache:
    """A batch's session state: read once, then what the batch last wrote."""

    def __init__(self) -> None:
        self.known = False
        self.state: bytes | None = None

    def read(self, actions: SessionActions) -> bytes | None:
        if not self.known:
            self.state, self.known = actions.get_state(), True
        return self.state


class CachedState:
    """A message's ``SessionActions`` whose state reads come from the batch's ``StateCache``
    (a session's state changes only through the batch's own writes while it holds the
    session); everything else goes through to ``actions``."""

    def __init__(self, actions: SessionActions, cache: StateCache) -> None:
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


def settlements() -> ThreadPoolExecutor:
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
class Held:
    """A batch's message whose task completed, its item not yet written nor it settled (or,
    with no task or item, a completed message whose completion is left to the trigger)."""

    index: int
    incoming: IncomingMessage
    actions: SessionActions
    ending: Ending
    task: str
    item: Any
    had_state: bool


def preparing(name: str, batch_task: BatchTask, items: list[tuple[str, Any]]) -> Task:
    """A task that prepares its item into ``items`` instead of writing it."""

    def prepare(call: TaskInvocation) -> dict[str, Any]:
        items.append((name, batch_task.prepare(call)))
        return {}

    return prepare


def hand_back_unrun(incoming: IncomingMessage, actions: SessionActions) -> Result:
    """Hand a message back unrun: an earlier message of its batch was handed back."""
    actions.abandon()
    logger.info("session=%s message=%s handed back unrun", incoming.session_id, incoming.message_id)
    return Result(
        Outcome.ABANDONED, EARLIER_MESSAGE_HANDED_BACK, "An earlier message was handed back"
    )
