"""An invocation's hold on its session while it waits: a task's backoff, an open circuit, a
paused pipeline; and its requests to Service Bus, ridden through a blip (``SteadyActions``).

Waiting inside the invocation keeps the session, so the order of its messages holds and no
delivery is spent: the message is not handed back, its delivery count does not move. The hold
sleeps in short steps and renews the session's lock before it runs out (through the
invocation's ``SessionActions``: the host's RenewSessionLock, which Azure's Service Bus
extension carries out for one-message and batch triggers alike, where the host's own renewal
covers one-message triggers only and at most maxAutoLockRenewalDuration). It lasts at most
``budget`` seconds from the start of the invocation, below the function timeout; after that
the caller hands its message back, which costs one delivery and no attempt.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TypeVar

from ..domain.errors import SERVICE_BUS, ServiceUnavailable
from .ports import SessionActions

T = TypeVar("T")

# How long a wait sleeps between two looks at what it waits for.
STEP_SECONDS = 0.5
# Renew this long after the last renewal until a renewal says how long the lock lasts.
FIRST_RENEWAL_SECONDS = 15.0


class Hold:
    def __init__(
        self,
        actions: SessionActions,
        *,
        budget: float,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        step: float = STEP_SECONDS,
    ) -> None:
        self._actions = actions
        self._sleep = sleep
        self._monotonic = monotonic
        self._step = step
        self._started = monotonic()
        self._ends = self._started + budget
        self._renewed = self._started  # the host received (or renewed) just before
        self._renew_every = FIRST_RENEWAL_SECONDS

    @property
    def left(self) -> float:
        """Seconds of the budget left."""
        return max(self._ends - self._monotonic(), 0.0)

    def wait(self, seconds: float, *, until: Callable[[], bool] | None = None) -> bool:
        """Wait ``seconds``, or until ``until()`` is true, renewing the session's lock when it
        is due. False, at once, when the budget would run out first: the caller hands its
        message back (the budget is never overrun by a wait)."""
        ends = self._monotonic() + seconds
        if ends > self._ends:
            return False
        while (left := ends - self._monotonic()) > 0:
            if until is not None and until():
                return True
            self._renew_if_due()
            self._sleep(min(left, self._step))
        return True

    def _renew_if_due(self) -> None:
        now = self._monotonic()
        if now - self._renewed < self._renew_every:
            return
        locked_until = self._actions.renew_lock()
        self._renewed = self._monotonic()
        if locked_until is not None:
            lasts = (locked_until - datetime.now(UTC)).total_seconds()
            # Half the lock's duration (at least a second), as the host renews.
            self._renew_every = max(lasts / 2, 1.0)


# How long a state or settlement request that finds Service Bus out of reach is tried again:
# about half a session lock (a minute on the app's queues), so that a blip is ridden out
# while the lock may still hold, and a lost lock does not keep the invocation long.
SERVICE_BUS_PATIENCE_SECONDS = 30.0


class SteadyActions:
    """The invocation's ``SessionActions``, each request that finds Service Bus out of reach
    (``ServiceUnavailable``) tried again with ``backoff`` for up to ``patience`` seconds from
    its first failure, each failure told to ``failed`` (the pipeline's circuit, which an
    outage of Service Bus opens as it opens on Storage), each success to ``reached``. Then
    the error is raised: the invocation fails and the message comes back (its lock is lost,
    or will run out)."""

    def __init__(
        self,
        actions: SessionActions,
        *,
        failed: Callable[[str], None],
        reached: Callable[[str], None],
        backoff: Callable[[int], float],
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        patience: float = SERVICE_BUS_PATIENCE_SECONDS,
    ) -> None:
        self._actions = actions
        self._failed = failed
        self._reached = reached
        self._backoff = backoff
        self._sleep = sleep
        self._monotonic = monotonic
        self._patience = patience

    def get_state(self) -> bytes | None:
        return self._steady(self._actions.get_state)

    def set_state(self, state: bytes | None) -> None:
        self._steady(lambda: self._actions.set_state(state))

    def complete(self) -> None:
        self._steady(self._actions.complete)

    def abandon(self) -> None:
        self._steady(self._actions.abandon)

    def dead_letter(self, reason: str, description: str) -> None:
        self._steady(lambda: self._actions.dead_letter(reason, description))

    def release_session(self) -> None:
        self._steady(self._actions.release_session)

    def renew_lock(self) -> datetime | None:
        return self._steady(self._actions.renew_lock)

    def _steady(self, request: Callable[[], T]) -> T:
        first: float | None = None
        failures = 0
        while True:
            try:
                answer = request()
            except ServiceUnavailable as error:
                now = self._monotonic()
                first = now if first is None else first
                failures += 1
                self._failed(error.dependency)
                delay = self._backoff(failures)
                if now + delay - first > self._patience:
                    raise
                self._sleep(delay)
                continue
            self._reached(SERVICE_BUS)
            return answer
