"""An invocation's hold on its session while it waits: a task's backoff, an open circuit, a
paused pipeline.

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

from .ports import SessionActions

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
