"""Order numbers from a counter in Azure Tables, one per job."""

from __future__ import annotations

import random
import time
from typing import Any

from azure.core import MatchConditions
from azure.data.tables import TableClient, TableEntity, TableTransactionError, UpdateMode

from ..domain.errors import TransientTaskError
from .azure_errors import TABLE_STORAGE, translated
from .table_keys import table_key

_PARTITION = "order-numbers"
_COUNTER = "!counter"  # table_key never yields a key starting with '!'
_MAX_ATTEMPTS = 200
# Status codes of a lost race: the counter moved (412) or someone created it, or this job's
# allocation, first (409). Anything else is a real failure and is raised as it is.
_LOST_RACE = frozenset({409, 412})


class TableOrderNumbers:
    """``allocate`` writes the counter and the job's allocation in one entity group transaction:
    the counter update is conditional on the ETag it read, and the allocation is an insert
    keyed by the job id. So concurrent callers never share a number, numbers have no gaps,
    and a second call for the same job (even a concurrent one) returns the first number."""

    def __init__(self, table: TableClient, *, prefix: str = "ORD-") -> None:
        self._table = table
        self._prefix = prefix

    @translated(TABLE_STORAGE)
    def allocate(self, job_id: str) -> str:
        row_key = table_key(job_id)
        for attempt in range(_MAX_ATTEMPTS):
            allocation, counter = self._read(row_key)
            if allocation is not None:
                return str(allocation["OrderNumber"])
            number = (int(counter["Last"]) if counter is not None else 0) + 1
            order_number = f"{self._prefix}{number:08d}"
            try:
                self._table.submit_transaction(
                    [
                        self._counter_operation(counter, number),
                        (
                            "create",
                            {
                                "PartitionKey": _PARTITION,
                                "RowKey": row_key,
                                "JobId": job_id,
                                "OrderNumber": order_number,
                                "Number": number,
                            },
                        ),
                    ]
                )
            except TableTransactionError as error:
                if error.status_code not in _LOST_RACE:
                    raise
                # Spread the retries so that contending workers do not collide again in step.
                time.sleep(random.uniform(0, min(0.2, 0.01 * 2**attempt)))
                continue
            return order_number
        raise TransientTaskError(
            "OrderNumberContention",
            f"Could not allocate an order number for job {job_id} after {_MAX_ATTEMPTS} "
            "attempts: too many workers allocated at the same moment. The task will be retried.",
        )

    @translated(TABLE_STORAGE)
    def find(self, job_id: str) -> str | None:
        allocation, _ = self._read(table_key(job_id))
        return str(allocation["OrderNumber"]) if allocation is not None else None

    @translated(TABLE_STORAGE)
    def job_of(self, order_number: str) -> str | None:
        allocations = self._table.query_entities(
            "PartitionKey eq @pk and OrderNumber eq @number",
            parameters={"pk": _PARTITION, "number": order_number},
            select=["JobId"],
        )
        return next((str(entity["JobId"]) for entity in allocations), None)

    def _counter_operation(self, counter: TableEntity | None, number: int) -> Any:
        entity = {"PartitionKey": _PARTITION, "RowKey": _COUNTER, "Last": number}
        if counter is None:
            return ("create", entity)
        return (
            "update",
            entity,
            {
                "mode": UpdateMode.REPLACE,
                "etag": counter.metadata["etag"],
                "match_condition": MatchConditions.IfNotModified,
            },
        )

    def _read(self, row_key: str) -> tuple[TableEntity | None, TableEntity | None]:
        """The job's allocation and the counter, in one round trip. (The SDK substitutes
        parameters between spaces only, hence the spaces inside the parentheses.)"""
        found = {
            entity["RowKey"]: entity
            for entity in self._table.query_entities(
                "PartitionKey eq @partition and ( RowKey eq @job or RowKey eq @counter )",
                parameters={"partition": _PARTITION, "job": row_key, "counter": _COUNTER},
            )
        }
        return found.get(row_key), found.get(_COUNTER)
