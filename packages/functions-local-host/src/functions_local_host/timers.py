"""Timer triggers: NCRONTAB schedules with seconds (``second minute hour day month
day-of-week``, UTC) or a TimeSpan interval (``hh:mm:ss``), runOnStartup, and the past-due flag.

One timer function never runs twice at once. When an invocation overruns one or more
occurrences, the host runs once more at once with ``past_due=True`` instead of catching up every
missed occurrence. Across instances of the app (hosts on one AzureWebJobsStorage) a timer runs
on one of them: its listener runs only while that instance holds the listener's singleton lock
(``singleton.py``), as in Azure; without AzureWebJobsStorage there is no lock (one instance).
A lock lost (its renewal failed) stops the schedule at once, and the listener seeks the lock
again, every listenerLockRecoveryPollingInterval, until it has it.

With ``useMonitor`` (``schedule_monitor.py``) the schedule's status lives in storage: whenever
the listener starts (takes the lock), an occurrence missed since the last run (on this
instance or another) runs at once, past due.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta

from croniter import croniter

from .config import HostConfigurationError, timespan
from .functions import FunctionSpec, invoke
from .rpc import typed_data
from .schedule_monitor import NEVER, ScheduleMonitor, ScheduleStatus, monitored_by_default, past_due
from .singleton import ListenerLock

# How often a running schedule looks whether its singleton lock is still held.
_LOCK_CHECK_SECONDS = 1.0

logger = logging.getLogger("functions_local_host")


class Schedule:
    def __init__(self, expression: str) -> None:
        self.expression = expression.strip()
        fields = self.expression.split()
        self._interval: timedelta | None = None
        if len(fields) == 1 and ":" in self.expression:
            self._interval = timedelta(seconds=timespan(self.expression, 0))
            if self._interval <= timedelta(0):
                raise HostConfigurationError(f"timer schedule {expression!r} is not positive")
        elif len(fields) in (5, 6):
            # The host reads 5 fields as minute..day-of-week (second 0), 6 with seconds first.
            cron = self.expression if len(fields) == 6 else f"0 {self.expression}"
            if not croniter.is_valid(cron, second_at_beginning=True):
                raise HostConfigurationError(f"timer schedule {expression!r} is not NCRONTAB")
            self._cron = cron
        else:
            raise HostConfigurationError(
                f"timer schedule {expression!r}: expected 6 NCRONTAB fields "
                "(second minute hour day month day-of-week) or a TimeSpan"
            )

    @property
    def adjusts_for_dst(self) -> bool:
        """What the host's TimerInfo says: a cron schedule adjusts for DST, an interval not."""
        return self._interval is None

    def next_after(self, moment: datetime) -> datetime:
        if self._interval is not None:
            return moment + self._interval
        return croniter(self._cron, moment, second_at_beginning=True).get_next(datetime)


class TimerListener:
    """``monitor``: the schedule's status in storage, used when the function's ``useMonitor``
    (or its default for the schedule) says so."""

    def __init__(
        self,
        spec: FunctionSpec,
        lock: ListenerLock | None = None,
        monitor: ScheduleMonitor | None = None,
    ) -> None:
        self.spec = spec
        self.lock = lock
        self.schedule = Schedule(str(spec.setting("schedule")))
        self.run_on_startup = bool(spec.setting("runOnStartup", False))
        use_monitor = spec.setting("useMonitor")
        if use_monitor is None:
            use_monitor = monitored_by_default(self.schedule, datetime.now(UTC))
        self.monitor = monitor if use_monitor else None
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=spec.name, daemon=True)
        self.last: datetime | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float) -> None:
        self._stopping.set()
        self._thread.join(timeout)

    def next_occurrence(self) -> datetime:
        return self.schedule.next_after(datetime.now(UTC))

    def _run(self) -> None:
        try:
            while self._acquired():
                self._run_schedule()
        except Exception:
            logger.exception("%s: the timer stopped", self.spec.name)
        finally:
            if self.lock is not None:
                self.lock.release()

    def _acquired(self) -> bool:
        """Wait until this instance holds the listener lock (at once without one); False when
        the host stops first."""
        while not self._stopping.is_set():
            if self.lock is None:
                return True
            try:
                if self.lock.acquire():
                    return True
            except Exception as error:  # storage unreachable: try again later
                logger.warning("%s: the singleton lock cannot be taken: %s", self.spec.name, error)
            if self._stopping.wait(self.lock.recovery_interval):
                return False
        return False

    def _holds_lock(self) -> bool:
        return self.lock is None or self.lock.held

    def _run_schedule(self) -> None:
        """The schedule, while the lock is held (its listener starts when the lock is taken:
        a missed occurrence by the monitor, or runOnStartup, first, as in the host)."""
        missed = self._missed_occurrence()
        if missed is not None:
            logger.info("Function '%s' is past due on startup. Executing now.", self.spec.name)
            self._fire(scheduled=datetime.now(UTC), past_due=True, reason="past due", was=missed)
        elif self.run_on_startup:
            self._fire(scheduled=datetime.now(UTC), past_due=False, reason="startup")
        due = self.schedule.next_after(datetime.now(UTC))
        late = False
        while not self._stopping.is_set():
            while (wait := (due - datetime.now(UTC)).total_seconds()) > 0:
                if self._stopping.wait(min(wait, _LOCK_CHECK_SECONDS)):
                    return
                if not self._holds_lock():
                    return  # lost: another instance may take it and run this occurrence
            if not self._holds_lock():
                return
            self._fire(scheduled=due, past_due=late, reason="timer")
            due, late = self._following(due)

    def _missed_occurrence(self) -> datetime | None:
        """With the monitor: the recorded next occurrence when it has passed (the schedule
        is past due), else None; the status is brought up to date as the extension does."""
        if self.monitor is None:
            return None
        now = datetime.now(UTC)
        try:
            recorded = self.monitor.status()
        except Exception as error:  # storage unreachable: the schedule runs without it
            logger.warning("%s: the timer's status cannot be read: %s", self.spec.name, error)
            return None
        logger.debug("Function '%s' initial status: %s", self.spec.name, recorded)
        overdue, status, write = past_due(now, self.schedule, recorded)
        if write:
            self.monitor.update(status)
        if status.last > NEVER:
            self.last = status.last
        return status.next if overdue else None

    def _following(self, fired: datetime) -> tuple[datetime, bool]:
        """The next occurrence, and whether it is already past (the invocation overran it):
        missed occurrences collapse into one past-due run."""
        now = datetime.now(UTC)
        following = self.schedule.next_after(fired)
        if following > now:
            return following, False
        while (later := self.schedule.next_after(following)) <= now:
            following = later
        return following, True

    def _fire(
        self, *, scheduled: datetime, past_due: bool, reason: str, was: datetime | None = None
    ) -> None:
        """Run the function for the occurrence ``scheduled`` (``was``: the occurrence a past-due
        run makes up for), then record the status."""
        # The host's TimerInfo, serialized to JSON as the host sends it.
        timer_info = {
            "Schedule": {"AdjustForDST": self.schedule.adjusts_for_dst},
            "ScheduleStatus": {
                "Last": (self.last or NEVER).isoformat(),
                "Next": self.schedule.next_after(scheduled).isoformat(),
                "LastUpdated": datetime.now(UTC).isoformat(),
            },
            "IsPastDue": past_due,
        }
        details = {"timer": "", "startup": "RunOnStartup", "past due": "IsPastDue"}[reason]
        invoke(
            self.spec,
            typed_data(timer_info),
            reason="This function was started on host startup (runOnStartup)."
            if reason == "startup"
            else "Timer fired at " + scheduled.isoformat(),
            log_detail=f"\n  Trigger Details: UnscheduledInvocationReason: {details}"
            + (f", OriginalSchedule: {was.isoformat()}" if was else "")
            if details
            else "",
        )
        self.last = scheduled
        if self.monitor is not None:
            self.monitor.update(
                ScheduleStatus(
                    last=scheduled,
                    next=self.schedule.next_after(scheduled),
                    last_updated=scheduled,
                )
            )
