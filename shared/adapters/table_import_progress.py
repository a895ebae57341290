"""Import row outcomes in Table Storage: one row per imported row, PartitionKey = the job."""

from __future__ import annotations

from collections import Counter
from typing import Any

from azure.data.tables import TableClient, UpdateMode

from .azure_errors import TABLE_STORAGE, translated
from .table_keys import table_key


class TableImportProgress:
    """Implements ImportProgress. RowKey = session key + step, so a redelivered row upserts
    its own entity and the counts stay exact. Table: ``importprogress``."""

    def __init__(self, table: TableClient) -> None:
        self._table = table

    @translated(TABLE_STORAGE)
    def record(
        self, job_id: str, session_id: str, step: int | None, *, status: str, reason: str | None
    ) -> None:
        entity: dict[str, Any] = {
            "PartitionKey": table_key(job_id),
            # '~~' never occurs in an escaped key ('~' is always followed by two hex digits).
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
        query, parameters = "PartitionKey eq @pk", {"pk": table_key(job_id)}
        if session_id is not None:
            query += " and session_id eq @session"
            parameters["session"] = session_id
        entities = self._table.query_entities(query, parameters=parameters, select=["status"])
        return dict(Counter(entity["status"] for entity in entities))
