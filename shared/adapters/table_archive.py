"""The dead-letter archive in Table Storage, large bodies in Blob Storage.

Table ``deadletters``: PartitionKey = ``table_key(session id)``, RowKey = the sequence number
padded to 20 digits, so a partition read in key order is the session in send order. The
sessions' summaries, failure records and replay claims: ``table_failed_sessions``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from azure.data.tables import TableClient, UpdateMode
from azure.storage.blob import ContainerClient

from ..domain.archive import ArchivedMessage
from .azure_errors import TABLE_STORAGE, translated
from .table_batches import upsert_in_transactions
from .table_failed_sessions import TableFailedSessions
from .table_keys import table_key, value_of_table_key
from .table_transactions import TableTransactions

INLINE_BODY_MAX = 60 * 1024  # a binary property holds 64 KiB; bigger bodies go to Blob


class TableDeadLetterArchive(TableFailedSessions):
    """Implements DeadLetterArchive and FailureJournal."""

    def __init__(
        self,
        rows: TableClient,
        sessions: TableClient,
        bodies: ContainerClient,
        transactions: TableTransactions | None = None,
    ) -> None:
        super().__init__(sessions)
        self._rows = rows
        self._bodies = bodies
        self._transactions = transactions

    # -- rows ----------------------------------------------------------------------------------

    @translated(TABLE_STORAGE)
    def save(self, rows: Sequence[ArchivedMessage]) -> int:
        partitions = {row.session_id for row in rows}
        if len(partitions) > 1:
            raise ValueError("save() takes the rows of one session: a transaction is one partition")
        entities = [self.entity_of(row) for row in rows]
        return upsert_in_transactions(self._rows, entities, transactions=self._transactions)

    @translated(TABLE_STORAGE)
    def list_session(self, session_id: str, *, bodies: bool = True) -> list[ArchivedMessage]:
        entities = self._rows.query_entities(
            "PartitionKey eq @pk", parameters={"pk": table_key(session_id)}
        )
        rows = [self._row(entity, body=bodies) for entity in entities]
        return sorted(rows, key=lambda row: row.row_key)

    @translated(TABLE_STORAGE)
    def mark_replayed(self, rows: Sequence[ArchivedMessage]) -> None:
        by_partition: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            by_partition.setdefault(table_key(row.session_id), []).append(
                {
                    "PartitionKey": table_key(row.session_id),
                    "RowKey": row.row_key,
                    "status": row.status,
                    "replayed_session_id": row.replayed_session_id,
                    "replay_key": row.replay_key,
                    "replayed_at": row.replayed_at,
                }
            )
        for entities in by_partition.values():
            upsert_in_transactions(
                self._rows, entities, mode=UpdateMode.MERGE, transactions=self._transactions
            )

    # -- helpers -------------------------------------------------------------------------------

    def entity_of(self, row: ArchivedMessage) -> dict[str, Any]:
        pk = table_key(row.session_id)
        entity: dict[str, Any] = {
            "PartitionKey": pk,
            "RowKey": row.row_key,
            "queue": row.queue,
            "session_id": row.session_id,
            "message_id": row.message_id,
            "job_id": row.job_id,
            "task": row.task,
            "step": row.step,
            "is_last": row.is_last,
            "content_type": row.content_type,
            "application_properties": json.dumps(
                dict(row.application_properties), separators=(",", ":"), default=str
            ),
            "reason": row.reason,
            "description": row.description,
            "enqueued_time": row.enqueued_time,
            "delivery_count": row.delivery_count,
            "archived_at": row.archived_at,
            "status": row.status,
            "replayed_session_id": row.replayed_session_id,
            "replay_key": row.replay_key,
            "replayed_at": row.replayed_at,
            "trace_id": row.trace_id,
            "body_size": len(row.body),
        }
        if len(row.body) > INLINE_BODY_MAX:
            blob_name = f"{hashlib.sha256(pk.encode()).hexdigest()}/{row.row_key}"
            self._bodies.upload_blob(blob_name, row.body, overwrite=True)
            entity["body_blob"] = f"{self._bodies.container_name}/{blob_name}"
        elif row.body:
            entity["body"] = row.body
        return {key: value for key, value in entity.items() if value is not None}

    def _row(self, entity: dict[str, Any], *, body: bool) -> ArchivedMessage:
        if not body:
            body_bytes = b""
        elif entity.get("body_blob"):
            blob_name = entity["body_blob"].split("/", 1)[1]
            body_bytes = self._bodies.download_blob(blob_name).readall()
        else:
            body_bytes = bytes(entity.get("body") or b"")
        return ArchivedMessage(
            queue=entity["queue"],
            session_id=value_of_table_key(entity["PartitionKey"]),
            sequence_number=int(entity["RowKey"]),
            message_id=entity.get("message_id"),
            body=body_bytes,
            content_type=entity.get("content_type"),
            application_properties=json.loads(entity.get("application_properties") or "{}"),
            reason=entity.get("reason") or "",
            description=entity.get("description") or "",
            enqueued_time=entity.get("enqueued_time"),
            delivery_count=entity.get("delivery_count"),
            archived_at=entity.get("archived_at") or "",
            job_id=entity.get("job_id"),
            task=entity.get("task"),
            step=entity.get("step"),
            is_last=bool(entity.get("is_last")),
            status=entity.get("status") or "failed",
            replayed_session_id=entity.get("replayed_session_id"),
            replay_key=entity.get("replay_key"),
            replayed_at=entity.get("replayed_at"),
            trace_id=entity.get("trace_id"),
        )
