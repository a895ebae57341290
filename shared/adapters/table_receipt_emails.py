"""The records of the receipt e-mails, in Table Storage (table ``receiptemails``):
PartitionKey = the job, RowKey = ``receipt``: one point read per lookup, by the job, so a
replay of the job's session (a new session id) finds the record its first session wrote."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, cast

from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.data.tables import TableClient, UpdateMode

from ..domain.pipelines.purchase import RECEIPT_EMAILS_TABLE as RECEIPT_EMAILS_TABLE
from ..domain.receipt_emails import ReceiptEmail, ReceiptEmailStatus
from .azure_errors import TABLE_STORAGE, translated
from .table_keys import table_key

_ROW = "receipt"


class TableReceiptEmails:
    """Implements ReceiptEmails."""

    def __init__(self, table: TableClient) -> None:
        self._table = table

    @translated(TABLE_STORAGE)
    def create(self, record: ReceiptEmail) -> ReceiptEmail | None:
        try:
            self._table.create_entity(_entity(_stamped(record)))
        except ResourceExistsError:
            # An earlier attempt (or another instance, after a lost lock) wrote it: its
            # first-sent time is the one the request carries.
            return self.find(record.job_id)
        return None

    @translated(TABLE_STORAGE)
    def save(self, record: ReceiptEmail) -> ReceiptEmail:
        stamped = _stamped(record)
        self._table.upsert_entity(_entity(stamped), mode=UpdateMode.REPLACE)
        return stamped

    @translated(TABLE_STORAGE)
    def find(self, job_id: str) -> ReceiptEmail | None:
        try:
            entity = self._table.get_entity(table_key(job_id), _ROW)
        except ResourceNotFoundError:
            return None
        return _record(entity)


def _stamped(record: ReceiptEmail) -> ReceiptEmail:
    return replace(record, updated_at=datetime.now(UTC).isoformat(timespec="seconds"))


def _entity(record: ReceiptEmail) -> dict[str, Any]:
    entity: dict[str, Any] = {
        "PartitionKey": table_key(record.job_id),
        "RowKey": _ROW,
        "job_id": record.job_id,
        "to": record.to,
        "status": record.status,
        "request_id": record.request_id,
        "first_sent": record.first_sent.astimezone(UTC).isoformat(),
        "sender": record.sender,
        "generation": record.generation,
        "attempts": record.attempts,
        "updated_at": record.updated_at,
    }
    for name in ("operation_id", "detail"):
        if (value := getattr(record, name)) is not None:
            entity[name] = value
    return entity


def _record(entity: Any) -> ReceiptEmail:
    return ReceiptEmail(
        job_id=str(entity["job_id"]),
        to=str(entity["to"]),
        status=cast(ReceiptEmailStatus, entity["status"]),
        request_id=str(entity["request_id"]),
        first_sent=datetime.fromisoformat(str(entity["first_sent"])),
        sender=str(entity["sender"]),
        generation=int(entity["generation"]),
        attempts=int(entity["attempts"]),
        operation_id=entity.get("operation_id"),
        detail=entity.get("detail"),
        updated_at=entity.get("updated_at"),
    )
