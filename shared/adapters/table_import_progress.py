"""Import row outcomes in Table Storage: one row per imported row, PartitionKey = the job and
the session (``<job key>~~<session key>``), so that a job's rows spread over as many partitions
as it has sessions: one partition takes about 2,000 entities a second (docs/capacity.md), and
every row of an import writes one entity here.

Rows written before that layout have PartitionKey = the job alone; ``counts`` reads both."""

from __future__ import annotations

from collections import Counter
from typing import Any

from azure.data.tables import TableClient, UpdateMode

from .azure_errors import TABLE_STORAGE, translated
from .table_keys import table_key


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
        entity: dict[str, Any] = {
            # '~~' never occurs in an escaped key ('~' is always followed by two hex digits).
            "PartitionKey": _session_partition(job_id, session_id),
            "RowKey": f"{table_key(session_id)}~~{step if step is not None else 'x':>09}",
            "status": status,
            "session_id": session_id,
        }
        if step is not None:
            entity["step"] = step
        if reason:
            entity["reason"] = reason
        self._table.upsert_entity(entity, mode=UpdateMode.REPLACE)

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


def _session_partition(job_id: str, session_id: str | None) -> str:
    return f"{table_key(job_id)}~~{table_key(session_id)}"
