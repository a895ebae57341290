"""Order numbers from a counter in Azure Tables, one per job, in one of two modes.

- ``TableOrderNumbers`` (gapless, the default): every number is taken from the one counter
  entity in the same transaction as the job's allocation. Numbers have no gaps and follow the
  order of allocation, and every order in every instance updates that one entity: its rate is
  the ceiling of the whole app (docs/capacity.md).
- ``TableBlockOrderNumbers`` (blocks): each instance reserves a block of numbers from the same
  counter entity (one conditional update per block) and hands them out from memory; the
  job's allocation is an insert into a partition of its own. The counter is updated once per
  block, and the allocations spread over the table's partitions. The trade-off: the rest of
  a block is lost when its instance stops (gaps), as is the number of the loser of two
  concurrent calls for the same job, and numbers follow no global order (two instances hand
  out from two blocks at once).

Both modes share the counter, so switching modes never hands a number out twice; each reads
the other's allocations in ``find`` and ``find_job``. ``allocate`` looks for the job's allocation
only where its own mode writes it: switch with no purchase between its first and second step.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import ResourceExistsError, ResourceModifiedError, ResourceNotFoundError
from azure.data.tables import TableClient, TableEntity, TableTransactionError, UpdateMode

from ..domain.errors import TransientTaskError
from .azure_errors import TABLE_STORAGE, translated
from .table_keys import table_key

_PARTITION = "order-numbers"
_COUNTER = "!counter"  # table_key never yields a key starting with '!'
_BLOCK_ROW = "!order-number"  # the RowKey of a job's allocation in blocks mode, under its own key
_MAX_ATTEMPTS = 200


def allocation_keys(job_id: str) -> tuple[tuple[str, str], ...]:
    """Where a job's order number may be recorded, in either mode: (PartitionKey, RowKey)."""
    return ((_PARTITION, table_key(job_id)), (table_key(job_id), _BLOCK_ROW))


# Status codes of a lost race: the counter moved (412) or someone created it, or this job's
# allocation, first (409). Anything else is a real failure and is raised as it is.
_LOST_RACE = frozenset({409, 412})


class TableOrderNumbers:
    """``allocate`` writes the counter and the job's allocation in one entity group transaction:
    the counter update is conditional on the counter's ETag, and the allocation is an insert
    keyed by the job id. So concurrent callers never share a number, numbers have no gaps,
    and a second call for the same job (even a concurrent one) returns the first number.

    The counter as this object last wrote it (its value and the ETag the transaction answered)
    is kept, and the next allocation first tries its transaction on that: one request while no
    other instance allocated in between. When another did (412), or the job has its number
    already (409), the job's allocation and the counter are read and the transaction made on
    what was read, as often as it loses a race. This object's own calls take turns (the
    worker's concurrent sessions): two of them would race for the same counter ETag, the loser
    paying a read and a second transaction."""

    def __init__(self, table: TableClient, *, prefix: str = "ORD-") -> None:
        self._table = table
        self._prefix = prefix
        self._turns = threading.Lock()  # one allocation at a time; it guards _counter
        self._counter: _Counter | None = None  # as this object last wrote it

    @translated(TABLE_STORAGE)
    def allocate(self, job_id: str) -> str:
        with self._turns:
            return self._allocate(job_id)

    def _allocate(self, job_id: str) -> str:
        row_key = table_key(job_id)
        counter = self._counter
        if counter is not None:
            allocated = self._try(job_id, row_key, counter)
            if allocated is not None:
                return allocated
        for attempt in range(_MAX_ATTEMPTS):
            allocation, counter = self._read(row_key)
            if allocation is not None:
                return str(allocation["OrderNumber"])
            allocated = self._try(job_id, row_key, counter)
            if allocated is not None:
                return allocated
            # Spread the retries so that contending workers do not collide again in step.
            time.sleep(random.uniform(0, min(0.2, 0.01 * 2**attempt)))
        raise TransientTaskError(
            "OrderNumberContention",
            f"Could not allocate an order number for job {job_id} after {_MAX_ATTEMPTS} "
            "attempts: too many workers allocated at the same moment. The task will be retried.",
        )

    @translated(TABLE_STORAGE)
    def find(self, job_id: str) -> str | None:
        allocation, _ = self._read(table_key(job_id))
        if allocation is not None:
            return str(allocation["OrderNumber"])
        return _block_allocation(self._table, job_id)

    @translated(TABLE_STORAGE)
    def find_job(self, order_number: str) -> str | None:
        return _find_job(self._table, order_number)

    def _try(self, job_id: str, row_key: str, counter: _Counter | None) -> str | None:
        """The job's new number, allocated on ``counter`` (None: there is no counter yet); None
        when the transaction lost a race (the counter moved, or the job has a number)."""
        number = (counter.last if counter is not None else 0) + 1
        order_number = f"{self._prefix}{number:08d}"
        try:
            answers = self._table.submit_transaction(
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
            if error.status_code == 412:  # the counter moved on: read it again
                self._counter = None
            return None
        self._counter = _Counter(number, str(answers[0]["etag"]))
        return order_number

    def _counter_operation(self, counter: _Counter | None, number: int) -> Any:
        entity = {"PartitionKey": _PARTITION, "RowKey": _COUNTER, "Last": number}
        if counter is None:
            return ("create", entity)
        return (
            "update",
            entity,
            {
                "mode": UpdateMode.REPLACE,
                "etag": counter.etag,
                "match_condition": MatchConditions.IfNotModified,
            },
        )

    def _read(self, row_key: str) -> tuple[TableEntity | None, _Counter | None]:
        """The job's allocation and the counter, in one round trip. (The SDK substitutes
        parameters between spaces only, hence the spaces inside the parentheses.)"""
        found = {
            entity["RowKey"]: entity
            for entity in self._table.query_entities(
                "PartitionKey eq @partition and ( RowKey eq @job or RowKey eq @counter )",
                parameters={"partition": _PARTITION, "job": row_key, "counter": _COUNTER},
            )
        }
        counter = found.get(_COUNTER)
        return found.get(row_key), (
            None
            if counter is None
            else _Counter(int(counter["Last"]), str(counter.metadata["etag"]))
        )


@dataclass(frozen=True)
class _Counter:
    """The counter entity: the last number handed out, and the ETag it has with it."""

    last: int
    etag: str


class TableBlockOrderNumbers:
    """``allocate`` takes the next number of this instance's block (reserving a new block of
    ``block_size`` from the shared counter, with its ETag, when the block is used up) and
    inserts the job's allocation under the job's own partition key. A job already allocated
    keeps its number: the allocation is read first, and of two concurrent calls for the same
    job the insert that comes second fails and returns the first's number. So no number is
    handed out twice and a job has one number; numbers have gaps and no global order."""

    def __init__(self, table: TableClient, *, block_size: int, prefix: str = "ORD-") -> None:
        if block_size < 2:
            raise ValueError(f"block_size must be at least 2, not {block_size}")
        self._table = table
        self._prefix = prefix
        self._block_size = block_size
        self._lock = threading.Lock()
        self._next = 0  # the next number of the block, and the first past it
        self._end = 0

    @translated(TABLE_STORAGE)
    def allocate(self, job_id: str) -> str:
        found = _block_allocation(self._table, job_id)
        if found is not None:
            return found
        number = self._take()
        order_number = f"{self._prefix}{number:08d}"
        try:
            self._table.create_entity(
                {
                    "PartitionKey": table_key(job_id),
                    "RowKey": _BLOCK_ROW,
                    "JobId": job_id,
                    "OrderNumber": order_number,
                    "Number": number,
                }
            )
        except ResourceExistsError:
            # A concurrent call for the same job inserted first: its number is the job's, and
            # the one taken here stays unused (a gap).
            first = _block_allocation(self._table, job_id)
            if first is None:  # pragma: no cover - allocations are never deleted
                raise
            return first
        return order_number

    @translated(TABLE_STORAGE)
    def find(self, job_id: str) -> str | None:
        found = _block_allocation(self._table, job_id)
        if found is not None:
            return found
        return _gapless_allocation(self._table, job_id)

    @translated(TABLE_STORAGE)
    def find_job(self, order_number: str) -> str | None:
        return _find_job(self._table, order_number)

    def _take(self) -> int:
        with self._lock:
            if self._next >= self._end:
                first = self._reserve()
                self._next, self._end = first, first + self._block_size
            number = self._next
            self._next += 1
            return number

    def _reserve(self) -> int:
        """The first number of a new block: the counter moved on by ``block_size`` with its ETag,
        so two instances never reserve the same block."""
        for attempt in range(_MAX_ATTEMPTS):
            try:
                counter: TableEntity | None = self._table.get_entity(_PARTITION, _COUNTER)
            except ResourceNotFoundError:
                counter = None
            last = int(counter["Last"]) if counter is not None else 0
            entity = {
                "PartitionKey": _PARTITION,
                "RowKey": _COUNTER,
                "Last": last + self._block_size,
            }
            try:
                if counter is None:
                    self._table.create_entity(entity)
                else:
                    self._table.update_entity(
                        entity,
                        mode=UpdateMode.REPLACE,
                        etag=counter.metadata["etag"],
                        match_condition=MatchConditions.IfNotModified,
                    )
            except (ResourceExistsError, ResourceModifiedError):
                time.sleep(random.uniform(0, min(0.2, 0.01 * 2**attempt)))
                continue
            return last + 1
        raise TransientTaskError(
            "OrderNumberContention",
            f"Could not reserve a block of order numbers after {_MAX_ATTEMPTS} attempts: too "
            "many instances reserved at the same moment. The task will be retried.",
        )


def _block_allocation(table: TableClient, job_id: str) -> str | None:
    try:
        entity = table.get_entity(table_key(job_id), _BLOCK_ROW, select=["OrderNumber"])
    except ResourceNotFoundError:
        return None
    return str(entity["OrderNumber"])


def _gapless_allocation(table: TableClient, job_id: str) -> str | None:
    try:
        entity = table.get_entity(_PARTITION, table_key(job_id), select=["OrderNumber"])
    except ResourceNotFoundError:
        return None
    return str(entity["OrderNumber"])


def _find_job(table: TableClient, order_number: str) -> str | None:
    """Either mode's allocation: a scan of the table (the counter has no OrderNumber), for an
    operator's look-up, never on a task's path."""
    allocations = table.query_entities(
        "OrderNumber eq @number", parameters={"number": order_number}, select=["JobId"]
    )
    return next((str(entity["JobId"]) for entity in allocations), None)
