"""Timer triggers: a 6-field NCRONTAB schedule from a setting, runOnStartup, past-due."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from functions_local_host import HostConfigurationError, LocalHost
from functions_local_host.schedule_monitor import ScheduleStatus, monitored_by_default, past_due
from functions_local_host.timers import Schedule
from local_host_testing import wait_for

ONE_MINUTE = timedelta(minutes=1)


def test_every_second_schedule_fires_and_run_on_startup_fires_at_once(
    run_host: Callable[..., LocalHost], seen: Any
) -> None:
    run_host(["every_second"], settings={"EVERY_SECOND": "*/1 * * * * *"})
    calls = wait_for(
        lambda: len(seen.of("every_second")) >= 4 and seen.of("every_second"),
        timeout=3 + 10,  # three occurrences a second apart, and 10 s for a busy machine
        what="four timer invocations",
    )
    # The startup run first (no earlier run), then one run per occurrence, by the schedule the
    # host hands each run: its next occurrence one second after the previous run's. A run that
    # a busy machine made late is past due and collapses the occurrences it missed.
    assert calls[0]["status"]["Last"].startswith("0001-01-01")
    following = [datetime.fromisoformat(c["status"]["Next"]) for c in calls[1:]]
    for (earlier, later), call in zip(itertools.pairwise(following), calls[2:], strict=True):
        gap = later - earlier
        assert gap.microseconds == 0 and gap.total_seconds() >= 1, (earlier, later)
        if not call["past_due"]:
            assert gap == timedelta(seconds=1), (earlier, later)


def test_run_on_startup_runs_before_the_first_occurrence(
    run_host: Callable[..., LocalHost], seen: Any
) -> None:
    # An occurrence once a year: only runOnStartup can run it now.
    run_host(["every_second"], settings={"EVERY_SECOND": "0 0 0 1 1 *"})
    wait_for(lambda: seen.of("every_second"), timeout=3, what="the startup run")
    assert len(seen.of("every_second")) == 1


def test_an_overrun_makes_the_next_run_past_due(
    run_host: Callable[..., LocalHost], seen: Any
) -> None:
    # slow_timer sleeps 2.2 s on a 1 s schedule: the run after it is late.
    run_host(["slow_timer"])
    calls = wait_for(
        lambda: len(seen.of("slow_timer")) >= 2 and seen.of("slow_timer"),
        timeout=2 * 2.2 + 10,  # two runs of 2.2 s, and 10 s for a busy machine
        what="two slow timer runs",
    )
    assert calls[0]["past_due"] is False
    assert calls[1]["past_due"] is True
    # At once, for an occurrence the first run overran (it fell before that run ended), not
    # at the next occurrence after it: by the host's schedule, not by the test's clock.
    overran = datetime.fromisoformat(calls[1]["status"]["Next"]) - timedelta(seconds=1)
    assert overran <= calls[0]["ended"], (overran, calls[0]["ended"])


def test_schedules() -> None:
    start = datetime(2026, 1, 1, 0, 0, 0, tzinfo=UTC)
    assert Schedule("0 */5 * * * *").next_after(start) == datetime(2026, 1, 1, 0, 5, tzinfo=UTC)
    assert Schedule("30 0 9 * * 1-5").next_after(start).isoformat() == "2026-01-01T09:00:30+00:00"
    assert Schedule("00:00:10").next_after(start) == datetime(2026, 1, 1, 0, 0, 10, tzinfo=UTC)
    with pytest.raises(HostConfigurationError):
        Schedule("every minute")


def test_the_schedule_monitor_decides_past_due_as_the_extension_does() -> None:
    """ScheduleMonitor.CheckPastDueAsync: no status yet is recorded and not past due; a
    recorded next occurrence that has passed is past due; a status from another schedule is
    brought up to date, not past due."""
    every_minute = Schedule("0 * * * * *")
    now = datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC)

    overdue, status, write = past_due(now, every_minute, None)
    assert (overdue, status.next, write) == (timedelta(0), now.replace(second=0) + ONE_MINUTE, True)

    last = datetime(2026, 1, 1, 11, 58, tzinfo=UTC)
    recorded = ScheduleStatus(last=last, next=last + ONE_MINUTE, last_updated=last)
    overdue, status, write = past_due(now, every_minute, recorded)
    assert (overdue, status, write) == (timedelta(seconds=90), recorded, False)

    hourly = Schedule("0 0 * * * *")  # the app's schedule changed since that status
    overdue, status, write = past_due(now, hourly, recorded)
    assert overdue == timedelta(0) and write
    assert status.next == datetime(2026, 1, 1, 13, 0, tzinfo=UTC)


def test_use_monitor_defaults_to_schedules_a_minute_apart_or_more() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert monitored_by_default(Schedule("0 */5 * * * *"), now)
    assert monitored_by_default(Schedule("00:01:00"), now)
    assert not monitored_by_default(Schedule("*/30 * * * * *"), now)
