"""The purge's deletes (``table_retention``): table rows in entity group transactions of at
most 100 rows of one partition, a transaction that finds a row gone done again row by row, and
blobs in batch deletes of at most 256 (the service's limit per batch:
https://learn.microsoft.com/rest/api/storageservices/blob-batch)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from azure.core.exceptions import HttpResponseError
from azure.data.tables import TableClient
from azure.storage.blob import ContainerClient

from .table_batches import TRANSACTION_MAX_OPERATIONS

BLOB_BATCH_MAX = 256
KEYS = ["PartitionKey", "RowKey"]
Key = tuple[str, str]


class TableDeletes:
    """Deletes over the app's tables and containers, by their names."""

    def __init__(
        self,
        tables: Mapping[str, TableClient],
        containers: Mapping[str, ContainerClient],
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._tables = tables
        self._containers = containers
        self._monotonic = monotonic

    def _delete_partition(self, table: str, partition: str) -> int:
        client = self._tables[table]
        found = client.query_entities(
            "PartitionKey eq @pk", parameters={"pk": partition}, select=KEYS
        )
        return self._delete_rows(client, map(key_of, found))[0]

    def _delete_present(self, table: str, keys: Iterable[Key]) -> int:
        """Point deletes of rows that may not exist: only those found count."""
        client = self._tables[table]
        present = [
            key
            for key in keys
            for _ in client.query_entities(
                "PartitionKey eq @pk and RowKey eq @rk",
                parameters={"pk": key[0], "rk": key[1]},
                select=KEYS,
            )
        ]
        return self._delete_rows(client, present)[0]

    def _delete_rows(
        self, table: TableClient, keys: Iterable[Key], until: float | None = None
    ) -> tuple[int, bool]:
        """Delete ``keys`` (in the order a query returns them: by partition), a transaction per
        partition and 100 rows; stop before a batch once ``until`` has passed."""
        deleted, batch = 0, list[Key]()
        for key in keys:
            if batch and (key[0] != batch[0][0] or len(batch) == TRANSACTION_MAX_OPERATIONS):
                if until is not None and self._monotonic() >= until:
                    return deleted, False
                deleted += _delete_batch(table, batch)
                batch = []
            batch.append(key)
        if batch:
            deleted += _delete_batch(table, batch)
        return deleted, True

    def _delete_blobs(self, container: str, names: list[str]) -> int:
        client = self._containers[container]
        deleted = 0
        for start in range(0, len(names), BLOB_BATCH_MAX):
            chunk = names[start : start + BLOB_BATCH_MAX]
            if len(chunk) == 1:
                try:
                    client.delete_blob(chunk[0])
                    deleted += 1
                except HttpResponseError as error:
                    if error.status_code != 404:
                        raise
                continue
            results = client.delete_blobs(*chunk, raise_on_any_failure=False)
            deleted += sum(1 for r in results if r.status_code == 202)
        return deleted


def _delete_batch(table: TableClient, batch: list[Key]) -> int:
    if len(batch) > 1:
        try:
            table.submit_transaction(
                [("delete", {"PartitionKey": pk, "RowKey": rk}) for pk, rk in batch]
            )
            return len(batch)
        except HttpResponseError as error:
            if error.status_code != 404:
                raise
    for pk, rk in batch:  # a row was gone: the rest one by one (a missing row is no error)
        table.delete_entity(pk, rk)
    return len(batch)


def key_of(entity: Any) -> Key:
    return str(entity["PartitionKey"]), str(entity["RowKey"])


class Counts:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()  # jobs are purged side by side

    def add(self, where: str, count: int) -> None:
        with self._lock:
            self.counts[where] = self.counts.get(where, 0) + count
