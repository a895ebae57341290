"""Retries of transient task failures, as data."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    """Transient errors are retried by redelivery (sleep, then abandon) until ``max_attempts``.

    ``max_attempts`` must stay below the queue's MaxDeliveryCount (10 by default): the app,
    not Service Bus, must be the one that gives up, or the session would never be marked failed.
    """

    max_attempts: int = 5
    min_backoff: float = 1.0
    max_backoff: float = 30.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if not 0 <= self.min_backoff <= self.max_backoff:
            raise ValueError("backoffs must satisfy 0 <= min_backoff <= max_backoff")

    @staticmethod
    def attempt(failed: int, delivery_count: int | None) -> int:
        """This delivery's attempt: one more than the ``failed`` attempts the session state
        counted. The trigger's delivery count (earlier deliveries), when it hands one over, is
        a floor: an attempt that died before it could count itself (a crash, a timeout)
        still counts."""
        return max(failed + 1, (delivery_count or 0) + 1)

    def backoff(self, attempt: int) -> float:
        return float(min(self.max_backoff, self.min_backoff * 2 ** (attempt - 1)))
