"""The alert conditions of ``shared.domain.alerts``, as they hold now, for the console's
overview: the same conditions the Azure alerts fire on (``infra/app/alerts.bicep``), from what
the app can read locally: the dead letters waiting in each session queue, the archive timer's
runs (``TimerRuns``), the sessions that failed in the window, each pipeline's pause."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from ..domain.alerts import Alert, AlertRules, TimerRun
from ..domain.retention import iso

ARCHIVE_TIMER = "archive_dead_letters"


def current_alerts(
    rules: AlertRules,
    *,
    now: datetime,
    waiting: Mapping[str, int],
    archive_run: TimerRun | None,
    failed_recently: Mapping[str, int],
    pipelines: Mapping[str, str],
    paused: Mapping[str, Any] | None = None,
) -> list[Alert]:
    """Each condition that holds at ``now``:

    - ``dead_letters_waiting``: a queue holds dead letters and no archive run that emptied the
      dead-letter queues started in the last ``dead_letter_wait_seconds`` (so at least one of
      them may have waited that long; a run that emptied them took every one older than its
      start);
    - ``failed_sessions``: more than ``failed_sessions_threshold`` sessions of a pipeline
      failed in the last ``failed_sessions_window_minutes`` (``failed_recently``, by queue);
    - ``archive_timer_failing``: the archive timer's latest run failed;
    - ``pipeline_paused``: a pipeline is paused by its circuit (``paused``: each pipeline's
      pause, None when it runs; a mapping or an object with ``cause`` and ``dependency``).
    """
    found: list[Alert] = []
    allowed = now - timedelta(seconds=rules.dead_letter_wait_seconds)
    drained = archive_run.last_drained_at if archive_run else None
    if drained is None or drained < iso(allowed):
        since = f"since {drained}" if drained else "yet"
        found.extend(
            Alert(
                "dead_letters_waiting",
                queue,
                f"{count} dead letter(s) wait in {queue}'s dead-letter queue and no archive run "
                f"has emptied the dead-letter queues {since} (allowed: "
                f"{rules.dead_letter_wait_seconds:g} s)",
            )
            for queue, count in waiting.items()
            if count
        )
    window = f"{rules.failed_sessions_window_minutes:g} minutes"
    for pipeline, queue in pipelines.items():
        count = failed_recently.get(queue, 0)
        if count > rules.failed_sessions_threshold:
            found.append(
                Alert(
                    "failed_sessions",
                    pipeline,
                    f"{count} sessions of {pipeline} failed in the last {window} (more than "
                    f"{rules.failed_sessions_threshold})",
                )
            )
    if archive_run is not None and archive_run.failing:
        found.append(
            Alert(
                "archive_timer_failing",
                ARCHIVE_TIMER,
                f"The archive timer's last run failed at {archive_run.last_failed_at}: "
                f"{archive_run.last_error or 'no error recorded'}",
            )
        )
    for pipeline, pause in (paused or {}).items():
        if _member(pause, "cause") == "circuit":
            found.append(
                Alert(
                    "pipeline_paused",
                    pipeline,
                    f"{pipeline} is paused by its circuit: {_member(pause, 'dependency')} "
                    f"failing since {_member(pause, 'since')}",
                )
            )
    return found


def _member(value: Any, name: str) -> Any:
    if value is None:
        return None
    if isinstance(value, Mapping):
        return value.get(name)
    return getattr(value, name, None)
