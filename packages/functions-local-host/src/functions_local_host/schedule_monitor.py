"""A timer's schedule status in AzureWebJobsStorage, so that an occurrence missed while no
instance ran the timer (a failover, a lost singleton lock, a host that was down) runs past due.

The timer extension's schedule monitor, as in Azure/azure-webjobs-sdk-extensions
(``src/WebJobs.Extensions/Extensions/Timers/``): ``StorageScheduleMonitorV2`` keeps the status
(``Last``, ``Next``, ``LastUpdated``) as JSON in the blob ``timers/{hostId}/{timer name}/status``
of the container ``azure-webjobs-hosts``; ``TimerListener.StartAsync`` reads it whenever the
listener starts (for a timer, whenever its instance takes the singleton lock) and
``ScheduleMonitor.CheckPastDueAsync`` decides: with no status yet, one is written with the next
occurrence; a status whose ``Next`` is not what the schedule gives after ``Last`` (the schedule
changed) is brought up to date and not past due; otherwise, a ``Next`` already passed means an
occurrence was missed, and the listener runs the function at once with ``IsPastDue``. After each
run the status is written again (best effort: a failed write is logged).

``useMonitor`` unset means true for schedules whose occurrences are a minute apart or more and
false for more frequent ones (learn.microsoft.com, Timer trigger for Azure Functions,
attributes: UseMonitor).
"""

from __future__ import annotations

import contextlib
import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from azure.core.exceptions import AzureError, ResourceExistsError, ResourceNotFoundError

from .singleton import hosts_container

logger = logging.getLogger("functions_local_host")

# ScheduleMonitor.DefaultDateTime: "never".
NEVER = datetime.min.replace(tzinfo=UTC)
_MONITOR_BY_DEFAULT_FROM = timedelta(minutes=1)


class Schedule(Protocol):
    def next_after(self, moment: datetime) -> datetime: ...


@dataclass(frozen=True)
class ScheduleStatus:
    last: datetime = NEVER
    next: datetime = NEVER
    last_updated: datetime = NEVER

    def as_json(self) -> str:
        return json.dumps(
            {
                "Last": self.last.isoformat(),
                "Next": self.next.isoformat(),
                "LastUpdated": self.last_updated.isoformat(),
            }
        )

    @classmethod
    def from_json(cls, text: str) -> ScheduleStatus:
        document = json.loads(text)
        return cls(
            last=_moment(document.get("Last")),
            next=_moment(document.get("Next")),
            last_updated=_moment(document.get("LastUpdated")),
        )


def monitored_by_default(schedule: Schedule, now: datetime) -> bool:
    """useMonitor's default: true when occurrences are at least a minute apart."""
    first = schedule.next_after(now)
    return schedule.next_after(first) - first >= _MONITOR_BY_DEFAULT_FROM


def past_due(
    now: datetime, schedule: Schedule, status: ScheduleStatus | None
) -> tuple[timedelta, ScheduleStatus, bool]:
    """``CheckPastDueAsync``: how long the schedule is past due (zero when it is not), the
    status to go on with, and whether that status must be written."""
    if status is None:
        return timedelta(0), ScheduleStatus(NEVER, schedule.next_after(now), now), True
    write = False
    if status.last > NEVER:
        expected, updated = schedule.next_after(status.last), status.last
    elif status.last_updated > NEVER:
        expected, updated = schedule.next_after(status.last_updated), status.last_updated
    else:
        expected, updated = schedule.next_after(now), now
    if status.next != expected:
        # The schedule changed: a next occurrence already past is not a missed one.
        if now > expected:
            expected, updated = schedule.next_after(now), now
        status, write = ScheduleStatus(NEVER, expected, updated), True
    return max(now - status.next, timedelta(0)), status, write


class ScheduleMonitor:
    """One timer's status blob (``StorageScheduleMonitorV2``)."""

    def __init__(self, connection_string: str, host_id: str, timer_name: str) -> None:
        self._container = hosts_container(connection_string)
        self.blob_name = f"timers/{host_id}/{timer_name}/status"
        self._blob = self._container.get_blob_client(self.blob_name)

    def status(self) -> ScheduleStatus | None:
        """The recorded status; None when none was recorded yet. Raises ``AzureError`` when
        storage cannot be read."""
        try:
            return ScheduleStatus.from_json(self._blob.download_blob().readall().decode())
        except ResourceNotFoundError:
            return None

    def update(self, status: ScheduleStatus) -> None:
        """Write the status; a failure is logged, not raised (the extension's best effort)."""
        try:
            try:
                self._blob.upload_blob(status.as_json().encode(), overwrite=True)
            except ResourceNotFoundError:  # no container yet
                with contextlib.suppress(ResourceExistsError):
                    self._container.create_container()
                self._blob.upload_blob(status.as_json().encode(), overwrite=True)
        except AzureError as error:
            logger.error("%s: updating the timer's status failed: %s", self.blob_name, error)


def _moment(value: object) -> datetime:
    if not value:
        return NEVER
    moment = datetime.fromisoformat(str(value))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
