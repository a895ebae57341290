"""When the broker must act by itself: lock and session-lock expiry, scheduled messages, TTL.

A heap of (due, kind, entity, sequence number, session id). The process's timer loop sleeps
until :meth:`Timers.next_due` or until a new, earlier timer wakes it; the broker then takes the
due timers one by one (:meth:`Timers.pop_due`) and decides what each means. A timer is a
reminder, not a fact: when it fires, the broker checks that what it was set for still holds.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from .entities import Entity

Kind = Literal["lock", "session", "due", "ttl"]


class Timers:
    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Kind, Entity, int, str]] = []
        self._tiebreak = 0
        self.wake: Callable[[], None] | None = None  # the timer loop sleeps until woken or due
        self.sleeping_until: int | None = None

    def add(
        self, due: int, kind: Kind, entity: Entity, sequence: int, session_id: str = ""
    ) -> None:
        self._tiebreak += 1
        heapq.heappush(self._heap, (due, self._tiebreak, kind, entity, sequence, session_id))
        if self.wake is not None and (self.sleeping_until is None or due < self.sleeping_until):
            self.wake()

    def next_due(self) -> int | None:
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: int) -> Iterator[tuple[Kind, Entity, int, str]]:
        """The timers due at ``now``, earliest first; timers added meanwhile count too."""
        while self._heap and self._heap[0][0] <= now:
            _, _, kind, entity, sequence, session_id = heapq.heappop(self._heap)
            yield kind, entity, sequence, session_id
