"""Orders' acceptances in Table Storage (table ``orderprogress``): PartitionKey =
``table_key(job id)``, RowKey ``accepted``; and rows ``step-<n>`` (zero-padded) with the latest
outcome of a step, which releases before this one wrote for every step and read an order's
status from. This release writes one, at the order's end, only while such a release runs beside
it (``ORDER_STEP_ROWS``); how far an order got is read from its sessions' outcomes
(``shared.service_layer.orders``), and from these rows where there are no outcomes yet."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from azure.data.tables import TableClient, UpdateMode

from ..domain.order_status import OrderRecord, StepOutcome
from .azure_errors import TABLE_STORAGE, translated
from .table_keys import table_key, value_of_table_key
from .table_snapshots import TableSnapshot

_ACCEPTED = "accepted"
_STEP = "step-"


class TableOrderProgress:
    """Implements OrderProgress."""

    def __init__(self, table: TableClient) -> None:
        self._table = table
        self._snapshot: TableSnapshot | None = None  # made by the first records()
        self._records: dict[str, OrderRecord] = {}  # by partition key, as of the snapshot
        self._reading = threading.Lock()

    @translated(TABLE_STORAGE)
    def accept(self, job_id: str, session_id: str, at: str) -> None:
        self._table.upsert_entity(
            {
                "PartitionKey": table_key(job_id),
                "RowKey": _ACCEPTED,
                "job_id": job_id,
                "session_id": session_id,
                "at": at,
            },
            mode=UpdateMode.REPLACE,
        )

    @translated(TABLE_STORAGE)
    def withdraw(self, job_id: str, session_id: str) -> None:
        self._table.delete_entity(table_key(job_id), _ACCEPTED)

    @translated(TABLE_STORAGE)
    def record(self, job_id: str, outcome: StepOutcome) -> None:
        entity: dict[str, Any] = {
            "PartitionKey": table_key(job_id),
            "RowKey": f"{_STEP}{outcome.step:09d}",
            "step": outcome.step,
            "task": outcome.task,
            "status": outcome.status,
            "session_id": outcome.session_id,
            "at": outcome.at,
        }
        if outcome.reason:
            entity["reason"] = outcome.reason
        self._table.upsert_entity(entity, mode=UpdateMode.REPLACE)

    @translated(TABLE_STORAGE)
    def find(self, job_id: str) -> OrderRecord | None:
        entities = list(
            self._table.query_entities("PartitionKey eq @pk", parameters={"pk": table_key(job_id)})
        )
        if not entities:
            return None
        return _record(job_id, entities)

    @translated(TABLE_STORAGE)
    def records(self, *, up_to: int) -> list[OrderRecord]:
        """The first ``up_to`` orders by partition key. The table is read whole once, then
        only the rows written since (``TableSnapshot``): the console counts every order every
        few seconds, and a scan of thousands of orders took a second or more each time. Only
        the first ``up_to`` orders are kept in memory (a larger ``up_to`` reads again)."""
        with self._reading:
            if self._snapshot is None or self._snapshot.limit < up_to:
                self._snapshot, self._records = TableSnapshot(self._table, partitions=up_to), {}
            with self._snapshot.refreshed() as (partitions, changed):
                for partition in changed:
                    entities = sorted(partitions[partition].values(), key=_row_key)
                    self._records[partition] = order_record(partition, entities)
                for gone in self._records.keys() - partitions.keys():
                    del self._records[gone]  # made room for an order with a smaller key
                return [self._records[key] for key in sorted(self._records)[:up_to]]


def _row_key(entity: Any) -> str:
    return str(entity["RowKey"])


def order_record(partition: str, entities: list[Any]) -> OrderRecord:
    """An order's record from the rows of its partition (in RowKey order)."""
    job_id = next((e["job_id"] for e in entities if e.get("job_id")), None)
    if job_id is None:  # steps recorded, the acceptance not: the key holds the id
        with contextlib.suppress(ValueError):  # a digest key holds none
            job_id = value_of_table_key(partition)
    return _record(job_id or "", entities)


def _record(job_id: str, entities: list[Any]) -> OrderRecord:
    accepted = next((e for e in entities if e["RowKey"] == _ACCEPTED), None)
    steps = tuple(
        StepOutcome(
            step=int(e["step"]),
            task=e["task"],
            status=e["status"],
            reason=e.get("reason"),
            session_id=e.get("session_id", ""),
            at=e.get("at", ""),
        )
        for e in sorted(entities, key=lambda e: str(e["RowKey"]))
        if str(e["RowKey"]).startswith(_STEP)
    )
    return OrderRecord(
        job_id=job_id,
        session_id=accepted.get("session_id") if accepted else None,
        accepted_at=accepted.get("at") if accepted else None,
        steps=steps,
    )
