"""The dead-letter archive in Table Storage, large bodies in Blob Storage.

Table ``deadletters``: PartitionKey = the session id (escaped, reversibly), RowKey = the
sequence number padded to 20 digits, so a partition read in key order is the session in send
order. Table ``failedsessions``: one row per session (RowKey ``summary``) with the operator's
view and the processor's failure record (the context a replay needs).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableClient, UpdateMode
from azure.storage.blob import ContainerClient

from ..domain.archive import (
    ArchivedMessage,
    FailedSession,
    FailureRecord,
    SessionNotArchived,
)
from ..domain.replays import ReplayRequest, ReplayRequestNotFound
from ..service_layer.ports import Page
from .table_keys import session_id_of, session_key

TRANSACTION_MAX_OPERATIONS = 100  # Table Storage's limit (and Azurite breaks above it)
TRANSACTION_MAX_BYTES = 3 * 1024 * 1024  # under the 4 MiB request limit, with room for JSON
INLINE_BODY_MAX = 60 * 1024  # a binary property holds 64 KiB; bigger bodies go to Blob
SUMMARY_ROW = "summary"


class TableDeadLetterArchive:
    """Implements DeadLetterArchive and FailureJournal."""

    def __init__(self, rows: TableClient, sessions: TableClient, bodies: ContainerClient) -> None:
        self._rows = rows
        self._sessions = sessions
        self._bodies = bodies

    # -- rows ----------------------------------------------------------------------------------

    def save(self, rows: Sequence[ArchivedMessage]) -> int:
        partitions = {row.session_id for row in rows}
        if len(partitions) > 1:
            raise ValueError("save() takes the rows of one session: a transaction is one partition")
        entities = [self.entity_of(row) for row in rows]
        return self._upsert_in_transactions(self._rows, entities)

    def list_session(self, session_id: str, *, bodies: bool = True) -> list[ArchivedMessage]:
        entities = self._rows.query_entities(
            "PartitionKey eq @pk", parameters={"pk": session_key(session_id)}
        )
        rows = [self._row(entity, body=bodies) for entity in entities]
        return sorted(rows, key=lambda row: row.row_key)

    def mark_replayed(self, rows: Sequence[ArchivedMessage]) -> None:
        by_partition: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            by_partition.setdefault(session_key(row.session_id), []).append(
                {
                    "PartitionKey": session_key(row.session_id),
                    "RowKey": row.row_key,
                    "status": row.status,
                    "replayed_session_id": row.replayed_session_id,
                    "replay_key": row.replay_key,
                    "replayed_at": row.replayed_at,
                }
            )
        for entities in by_partition.values():
            self._upsert_in_transactions(self._rows, entities, mode=UpdateMode.MERGE)

    # -- failure records and summaries ----------------------------------------------------------

    def record(self, session_id: str, record: FailureRecord) -> None:
        self._sessions.upsert_entity(
            {
                "PartitionKey": session_key(session_id),
                "RowKey": SUMMARY_ROW,
                "session_id": session_id,
                "record_task": record.task,
                "record_step": record.step,
                "record_reason": record.reason,
                "record_description": record.description,
                "record_at": record.at,
                "record_context": json.dumps(dict(record.context), separators=(",", ":")),
            },
            mode=UpdateMode.MERGE,
        )

    def get_record(self, session_id: str) -> FailureRecord | None:
        entity = self._summary_entity(session_id)
        if entity is None or not entity.get("record_reason"):
            return None
        return FailureRecord(
            task=entity["record_task"],
            step=entity.get("record_step"),
            reason=entity["record_reason"],
            description=entity.get("record_description") or "",
            at=entity.get("record_at") or "",
            context=json.loads(entity.get("record_context") or "{}"),
        )

    def save_summary(self, summary: FailedSession) -> None:
        self._sessions.upsert_entity(
            {
                "PartitionKey": session_key(summary.session_id),
                "RowKey": SUMMARY_ROW,
                "session_id": summary.session_id,
                "queue": summary.queue,
                "failed_task": summary.failed_task,
                "failed_step": summary.failed_step,
                "reason": summary.reason,
                "description": summary.description,
                "failed_at": summary.failed_at,
                "message_count": summary.message_count,
                "has_last": summary.has_last,
                "context": json.dumps(dict(summary.context), separators=(",", ":")),
                "status": summary.status,
                "replayed_session_id": summary.replayed_session_id,
                "replay_key": summary.replay_key,
                "replayed_at": summary.replayed_at,
            },
            mode=UpdateMode.MERGE,
        )

    def get_summary(self, session_id: str) -> FailedSession:
        entity = self._summary_entity(session_id)
        if entity is None or "status" not in entity:
            raise SessionNotArchived(session_id)
        return _summary(entity)

    def list_summaries(
        self,
        *,
        queue: str | None = None,
        task: str | None = None,
        reason: str | None = None,
        status: str | None = None,
        page_size: int = 50,
        continuation: str | None = None,
    ) -> Page[FailedSession]:
        clauses = ["RowKey eq @row", "status ne ''"]
        parameters: dict[str, Any] = {"row": SUMMARY_ROW}
        for name, value in (
            ("queue", queue),
            ("failed_task", task),
            ("reason", reason),
            ("status", status),
        ):
            if value is not None:
                clauses.append(f"{name} eq @{name}")
                parameters[name] = value
        pages: Any = self._sessions.query_entities(
            " and ".join(clauses), parameters=parameters, results_per_page=page_size
        ).by_page(continuation_token=_decode_token(continuation))
        try:
            items = [_summary(entity) for entity in next(pages)]
        except StopIteration:
            items = []
        return Page(items, _encode_token(pages.continuation_token))

    # -- helpers -------------------------------------------------------------------------------

    def _summary_entity(self, session_id: str) -> dict[str, Any] | None:
        try:
            return dict(self._sessions.get_entity(session_key(session_id), SUMMARY_ROW))
        except ResourceNotFoundError:
            return None

    def entity_of(self, row: ArchivedMessage) -> dict[str, Any]:
        pk = session_key(row.session_id)
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
            session_id=session_id_of(entity["PartitionKey"]),
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
        )

    @staticmethod
    def _upsert_in_transactions(
        table: TableClient,
        entities: Sequence[dict[str, Any]],
        *,
        mode: UpdateMode = UpdateMode.REPLACE,
    ) -> int:
        transactions = 0
        for chunk in _chunks(entities):
            table.submit_transaction([("upsert", entity, {"mode": mode}) for entity in chunk])
            transactions += 1
        return transactions


def _chunks(entities: Iterable[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """At most 100 operations and about 3 MiB per transaction."""
    chunk: list[dict[str, Any]] = []
    size = 0
    for entity in entities:
        entity_size = _approximate_size(entity)
        if chunk and (
            len(chunk) == TRANSACTION_MAX_OPERATIONS or size + entity_size > TRANSACTION_MAX_BYTES
        ):
            yield chunk
            chunk, size = [], 0
        chunk.append(entity)
        size += entity_size
    if chunk:
        yield chunk


def _approximate_size(entity: dict[str, Any]) -> int:
    size = 0
    for key, value in entity.items():
        size += len(key) + 16
        if isinstance(value, bytes):
            size += (len(value) * 4) // 3 + 4  # base64 on the wire
        else:
            size += len(str(value).encode("utf-8")) * 2
    return size


def _summary(entity: dict[str, Any]) -> FailedSession:
    return FailedSession(
        session_id=entity.get("session_id") or session_id_of(entity["PartitionKey"]) or "",
        queue=entity.get("queue") or "",
        failed_task=entity.get("failed_task"),
        failed_step=entity.get("failed_step"),
        reason=entity.get("reason") or "",
        description=entity.get("description") or "",
        failed_at=entity.get("failed_at"),
        message_count=entity.get("message_count") or 0,
        has_last=bool(entity.get("has_last")),
        context=json.loads(entity.get("context") or "{}"),
        status=entity.get("status") or "failed",
        replayed_session_id=entity.get("replayed_session_id"),
        replay_key=entity.get("replay_key"),
        replayed_at=entity.get("replayed_at"),
    )


def _encode_token(token: Any) -> str | None:
    if not token:
        return None
    raw = json.dumps(token, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_token(token: str | None) -> Any:
    if not token:
        return None
    try:
        padded = token + "=" * (-len(token) % 4)
        return json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, json.JSONDecodeError) as error:
        raise ValueError("the continuation token is not one this API returned") from error


class TableReplayRequests:
    """Implements ReplayRequestStore."""

    PARTITION = "replay"

    def __init__(self, table: TableClient) -> None:
        self._table = table

    def save(self, request: ReplayRequest) -> None:
        self._table.upsert_entity(
            {
                "PartitionKey": self.PARTITION,
                "RowKey": request.request_id,
                "queue": request.queue,
                "task": request.task,
                "reason": request.reason,
                "status": request.status,
                "found": request.found,
                "sent": request.sent,
                "failed": request.failed,
                "errors": json.dumps(list(request.errors)),
                "failure": request.failure,
                "created_at": request.created_at,
                "updated_at": request.updated_at,
            },
            mode=UpdateMode.REPLACE,
        )

    def get(self, request_id: str) -> ReplayRequest:
        try:
            entity = self._table.get_entity(self.PARTITION, request_id)
        except ResourceNotFoundError as error:
            raise ReplayRequestNotFound(request_id) from error
        return ReplayRequest(
            request_id=request_id,
            queue=entity.get("queue"),
            task=entity.get("task"),
            reason=entity.get("reason"),
            status=entity["status"],
            found=entity.get("found", 0),
            sent=entity.get("sent", 0),
            failed=entity.get("failed", 0),
            errors=tuple(json.loads(entity.get("errors") or "[]")),
            failure=entity.get("failure"),
            created_at=entity.get("created_at", ""),
            updated_at=entity.get("updated_at", ""),
        )
