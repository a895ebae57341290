"""The conditions that should wake someone, as the console's overview shows them locally and the
Azure alerts (``infra/app/alerts.bicep``) fire on them in Azure: dead letters waiting longer
than the archive schedule allows, a pipeline's failed sessions over a threshold in a window, the
archive timer failing, a pipeline paused by its circuit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

AlertKind = Literal[
    "dead_letters_waiting", "failed_sessions", "archive_timer_failing", "pipeline_paused"
]


@dataclass(frozen=True)
class AlertRules:
    """The thresholds (``ALERT_*`` settings; the same values are the Azure alerts'
    parameters): a dead letter may wait ``dead_letter_wait_seconds`` for the archive; more
    than ``failed_sessions_threshold`` sessions of a pipeline failing in
    ``failed_sessions_window_minutes`` is an incident."""

    dead_letter_wait_seconds: float = 900.0
    failed_sessions_threshold: int = 10
    failed_sessions_window_minutes: float = 15.0


@dataclass(frozen=True)
class TimerRun:
    """What a timer function's runs left behind (``TimerRuns``): when the last run started,
    succeeded, failed (and why), and when the last run that left nothing behind started
    (for the archive: it emptied every dead-letter queue it read)."""

    timer: str
    last_started_at: str | None = None
    last_succeeded_at: str | None = None
    last_drained_at: str | None = None
    last_failed_at: str | None = None
    last_error: str | None = None

    @property
    def failing(self) -> bool:
        """Its latest run failed."""
        return self.last_failed_at is not None and self.last_failed_at > (
            self.last_succeeded_at or ""
        )


@dataclass(frozen=True)
class Alert:
    """One condition that holds now: ``subject`` is the queue, pipeline or timer it is
    about, ``detail`` what an operator reads."""

    kind: AlertKind
    subject: str
    detail: str
