"""A table's rows kept in memory and brought up to date by reading only what was written since
the last read: what a page that counts a whole table every few seconds (the console's
overview) reads instead of the whole table each time."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

from azure.data.tables import TableClient

# Each read asks again for the rows stamped from this long before the previous read began (by
# the service's clock, its Date header): a write the service stamped before that read but
# committed after it is found by the next one.
OVERLAP = timedelta(seconds=5)
# Rows the purge deleted (shared.service_layer.retention) leave a snapshot at its next whole
# read, at most this long after the previous one.
FULL_READ_EVERY = timedelta(minutes=10)
_PAGE = 1000  # the most Table Storage returns per page


class TableSnapshot:
    """The rows of ``table`` that ``where`` selects (with the ``select`` columns only), by
    PartitionKey then RowKey.

    The first ``refreshed()`` reads them all; each later one reads only the rows whose
    Timestamp (set by the service at each write) is at most ``overlap`` older than the time
    the previous read began, by the service's clock. Rows are upserted, and deleted only by
    the purge, in bulk: a deleted row stays until the next whole read, which comes
    ``full_read_every`` after the one before. Thread-safe: one refresh at a time, and the rows
    are read under the same lock.

    With ``partitions``, only the rows of that many partitions, those with the smallest keys,
    are kept: the first read stops there (the service returns rows in key order), and a row of
    a smaller partition read later takes the place of the largest one kept. Memory stays
    bounded however large the table grows.
    """

    def __init__(
        self,
        table: TableClient,
        *,
        where: str = "",
        parameters: Mapping[str, Any] | None = None,
        select: tuple[str, ...] | None = None,
        overlap: timedelta = OVERLAP,
        partitions: int | None = None,
        full_read_every: timedelta = FULL_READ_EVERY,
    ) -> None:
        self._table = table
        self._full_read_every = full_read_every
        self._last_full: datetime | None = None  # when the last whole read began
        self._limit = partitions
        self._overlap = overlap
        self._where = where
        self._parameters = dict(parameters or {})
        self._select = ["PartitionKey", "RowKey", "Timestamp", *select] if select else None
        self._partitions: dict[str, dict[str, Any]] = {}
        self._last_read: datetime | None = None  # when the last read began, the service's time
        self._lock = threading.Lock()

    @property
    def limit(self) -> int:
        """How many partitions are kept (unbounded: the largest int)."""
        return self._limit if self._limit is not None else sys.maxsize

    @contextmanager
    def refreshed(self) -> Iterator[tuple[Mapping[str, Mapping[str, Any]], set[str]]]:
        """The rows by PartitionKey (each a mapping of RowKey to the row), brought up to date,
        and the PartitionKeys read this time; valid until the block ends."""
        with self._lock:
            yield self._partitions, self._refresh()

    def _refresh(self) -> set[str]:
        if (
            self._last_read is not None
            and self._last_full is not None
            and self._last_read - self._last_full >= self._full_read_every
        ):
            # Read whole: purged rows leave (cleared in place: refreshed() hands this dict out).
            self._partitions.clear()
            self._last_read = None
        clauses = [f"( {self._where} )"] if self._where else []  # spaced: a parameter may end it
        parameters = dict(self._parameters)
        if self._last_read is not None:
            clauses.append("Timestamp ge @snapshot_since")
            parameters["snapshot_since"] = self._last_read - self._overlap
        dates: list[datetime] = []
        rows = self._table.query_entities(
            " and ".join(clauses) or "PartitionKey ne ''",
            parameters=parameters,
            select=self._select,
            results_per_page=_PAGE,
            raw_response_hook=lambda response: dates.append(_date_of(response)),
        )
        changed: set[str] = set()
        first = self._last_read is None
        for row in rows:
            partition = str(row["PartitionKey"])
            if not self._room_for(partition):
                if first:
                    break  # in key order: every row after this one is of a larger partition
                continue
            self._partitions.setdefault(partition, {})[str(row["RowKey"])] = row
            changed.add(partition)
        if dates:
            # The first page's Date, to the second: the read began at most a second before.
            self._last_read = min(dates) - timedelta(seconds=1)
            if first:
                self._last_full = self._last_read
        return changed

    def _room_for(self, partition: str) -> bool:
        """Whether ``partition`` is kept, making room for it when it is among the smallest."""
        if self._limit is None or partition in self._partitions:
            return True
        if len(self._partitions) < self._limit:
            return True
        largest = max(self._partitions)
        if partition > largest:
            return False
        del self._partitions[largest]
        return True


def _date_of(response: Any) -> datetime:
    return parsedate_to_datetime(response.http_response.headers["Date"])
