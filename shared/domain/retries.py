"""Retries of transient task failures, as data: given up by time, not by count."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

# What a pipeline declares unless it says otherwise: an outage of Storage, Service Bus or a
# provider (a failover, throttling, a network blip) rarely outlasts a few minutes.
DEFAULT_WINDOW_SECONDS = 600.0
DEFAULT_MIN_BACKOFF_SECONDS = 1.0
DEFAULT_MAX_BACKOFF_SECONDS = 30.0
# How long one invocation may hold its session while it waits: below host.json's
# functionTimeout (10 minutes), with room for the task that runs after the wait.
DEFAULT_HOLD_SECONDS = 300.0
# Transient failures in a row, from two sessions or more, that open a pipeline's circuit.
DEFAULT_CIRCUIT_THRESHOLD = 5


@dataclass(frozen=True)
class RetryPolicy:
    """A step that fails transiently is tried again, ``min_backoff`` seconds after its first
    failure, then twice as long after each failure up to ``max_backoff`` (the cap), for as
    long as ``window`` seconds after its first failure. Past the window the session fails,
    with a reason that says what was out of reach and since when.

    Attempts are the app's own (counted in the session state): a delivery that handed a
    message back without running its task costs none, and Service Bus's MaxDeliveryCount
    never decides (docs/processor.md, "Waiting out an outage")."""

    window: float = DEFAULT_WINDOW_SECONDS
    min_backoff: float = DEFAULT_MIN_BACKOFF_SECONDS
    max_backoff: float = DEFAULT_MAX_BACKOFF_SECONDS

    def __post_init__(self) -> None:
        if self.window < 0:
            raise ValueError("window must be at least 0 seconds")
        if not 0 <= self.min_backoff <= self.max_backoff:
            raise ValueError("backoffs must satisfy 0 <= min_backoff <= max_backoff")

    def backoff(self, attempt: int) -> float:
        """How long to wait after failed attempt number ``attempt`` (1 for the first)."""
        return float(min(self.max_backoff, self.min_backoff * 2 ** min(attempt - 1, 62)))

    def deadline(self, since: datetime) -> datetime:
        """When a step that first failed at ``since`` is given up."""
        return since + timedelta(seconds=self.window)

    def gives_up(self, since: datetime, now: datetime) -> bool:
        """The window of a step that first failed at ``since`` has passed."""
        return now >= self.deadline(since)
