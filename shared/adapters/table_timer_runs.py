"""What the timer functions' runs left behind, in Table Storage (table ``timerruns``): one row per
timer (PartitionKey ``timer``, RowKey its name), each run merging its times into it, so the
overview can tell a timer that fails, or that has not emptied its queues for too long
(``shared.service_layer.alerts``)."""

from __future__ import annotations

from typing import Any

from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableClient, UpdateMode

from ..domain.alerts import TimerRun
from .azure_errors import TABLE_STORAGE, translated

TIMER_RUNS_TABLE = "timerruns"
_PARTITION = "timer"


class TableTimerRuns:
    """Implements TimerRuns."""

    def __init__(self, table: TableClient) -> None:
        self._table = table

    @translated(TABLE_STORAGE)
    def started(self, timer: str, at: str) -> None:
        self._merge(timer, last_started_at=at)

    @translated(TABLE_STORAGE)
    def succeeded(self, timer: str, at: str, *, started_at: str, drained: bool) -> None:
        self._merge(
            timer, last_succeeded_at=at, **({"last_drained_at": started_at} if drained else {})
        )

    @translated(TABLE_STORAGE)
    def failed(self, timer: str, at: str, error: str) -> None:
        self._merge(timer, last_failed_at=at, last_error=error[:2000])

    @translated(TABLE_STORAGE)
    def find(self, timer: str) -> TimerRun | None:
        try:
            entity = self._table.get_entity(_PARTITION, timer)
        except ResourceNotFoundError:
            return None
        return TimerRun(
            timer=timer,
            last_started_at=entity.get("last_started_at"),
            last_succeeded_at=entity.get("last_succeeded_at"),
            last_drained_at=entity.get("last_drained_at"),
            last_failed_at=entity.get("last_failed_at"),
            last_error=entity.get("last_error"),
        )

    def _merge(self, timer: str, **columns: Any) -> None:
        self._table.upsert_entity(
            {"PartitionKey": _PARTITION, "RowKey": timer, **columns}, mode=UpdateMode.MERGE
        )
