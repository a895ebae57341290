"""Import row outcomes in Table Storage: one row per imported row, PartitionKey = the job and
the session (``<job key>~~<session key>``), so that a job's rows spread over as many partitions
as it has sessions: one partition takes about 2,000 entities a second (docs/capacity.md), and
every row of an import writes one entity here.

Rows written before that layout have PartitionKey = the job alone; ``counts`` reads both."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from azure.data.tables import TableClient, UpdateMode

from ..service_layer.ports import RowOutcome
from .azure_errors import TABLE_STORAGE, translated
from .table_keys import table_key

# Operations in one entity-group transaction: Azure Tables' limit (Azurite answers a larger
# one brokenly, so the limit is kept there too).
TRANSACTION_LIMIT = 100


class TableImportProgress:
    """Implements ImportProgress. RowKey = session key + step, so a redelivered row upserts
    its own entity and the counts stay exact. Table: ``importprogress``. A job's partitions
    are the keys that start with ``<job key>~~``: one range."""

    def __init__(self, table: TableClient) -> None:
        self._table = table

    @translated(TABLE_STORAGE)
    def record(
        self, job_id: str, session_id: str, step: int | None, *, status: str, reason: str | None
    ) -> None:
        row = RowOutcome(job_id, session_id, step, status, reason)
        self._table.upsert_entity(_entity(row), mode=UpdateMode.REPLACE)

    @translated(TABLE_STORAGE)
    def record_many(self, rows: Sequence[RowOutcome]) -> None:
        """One entity-group transaction per partition (a job's session) and 100 rows, the
        most one transaction may hold; a row given twice keeps its last outcome, as a
        transaction may not touch one entity twice. A partition's chunks are written in
        order; a failed one raises, and the rows are recorded again on redelivery."""
        partitions: dict[str, dict[str, dict[str, Any]]] = {}
        for row in rows:
            entity = _entity(row)
            partitions.setdefault(entity["PartitionKey"], {})[entity["RowKey"]] = entity
        for entities in partitions.values():
            listed = list(entities.values())
            for start in range(0, len(listed), TRANSACTION_LIMIT):
                chunk = listed[start : start + TRANSACTION_LIMIT]
                if len(chunk) == 1:
                    self._table.upsert_entity(chunk[0], mode=UpdateMode.REPLACE)
                else:
                    self._table.submit_transaction(
                        [("upsert", entity, {"mode": UpdateMode.REPLACE}) for entity in chunk]
                    )

    @translated(TABLE_STORAGE)
    def counts(self, job_id: str, *, session_id: str | None = None) -> dict[str, int]:
        """The job's (or one of its sessions') rows by status, in both layouts. (The SDK
        substitutes parameters between spaces only, hence the spaces inside the parentheses.)"""
        parameters = {"legacy": table_key(job_id)}
        if session_id is None:
            prefix = f"{table_key(job_id)}~~"
            # Every key starting with the prefix sorts before the prefix with its last
            # character moved one up ('~' is 0x7E).
            query = "PartitionKey eq @legacy or ( PartitionKey ge @low and PartitionKey lt @high )"
            parameters |= {"low": prefix, "high": prefix[:-1] + chr(ord("~") + 1)}
        else:
            query = "PartitionKey eq @own or ( PartitionKey eq @legacy and session_id eq @session )"
            parameters |= {"own": _session_partition(job_id, session_id), "session": session_id}
        entities = self._table.query_entities(query, parameters=parameters, select=["status"])
        return dict(Counter(entity["status"] for entity in entities))


def _entity(row: RowOutcome) -> dict[str, Any]:
    entity: dict[str, Any] = {
        # '~~' never occurs in an escaped key ('~' is always followed by two hex digits).
        "PartitionKey": _session_partition(row.job_id, row.session_id),
        "RowKey": f"{table_key(row.session_id)}~~{row.step if row.step is not None else 'x':>09}",
        "status": row.status,
        "session_id": row.session_id,
    }
    if row.step is not None:
        entity["step"] = row.step
    if row.reason:
        entity["reason"] = row.reason
    return entity


def _session_partition(job_id: str, session_id: str | None) -> str:
    return f"{table_key(job_id)}~~{table_key(session_id)}"
