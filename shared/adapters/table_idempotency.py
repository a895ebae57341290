"""Idempotency-Key records in Table Storage (table ``idempotencykeys``): PartitionKey =
``table_key(scope)``, RowKey = ``table_key(key)``. Inserting is the lock (one insert wins);
taking over a stale record and releasing one are conditional on its ETag."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import (
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
)
from azure.data.tables import TableClient, TableEntity, UpdateMode

from ..domain.idempotency import IdempotencyRecord
from .azure_errors import TABLE_STORAGE, translated
from .table_keys import table_key


class TableIdempotencyRecords:
    """Implements IdempotencyRecords."""

    def __init__(self, table: TableClient) -> None:
        self._table = table

    @translated(TABLE_STORAGE)
    def start(
        self, scope: str, key: str, record: IdempotencyRecord
    ) -> tuple[bool, IdempotencyRecord]:
        while True:
            try:
                created = self._table.create_entity(_entity(scope, key, record))
                return True, _with_version(record, created)
            except ResourceExistsError:
                pass
            try:
                return False, _record(self._table.get_entity(table_key(scope), table_key(key)))
            except ResourceNotFoundError:
                continue  # released in between: try the insert again

    @translated(TABLE_STORAGE)
    def take_over(
        self, scope: str, key: str, stale: IdempotencyRecord, record: IdempotencyRecord
    ) -> IdempotencyRecord | None:
        try:
            written = self._table.update_entity(
                _entity(scope, key, record),
                mode=UpdateMode.REPLACE,
                etag=stale.version,
                match_condition=MatchConditions.IfNotModified,
            )
        except (ResourceModifiedError, ResourceNotFoundError):
            return None
        return _with_version(record, written)

    @translated(TABLE_STORAGE)
    def finish(self, scope: str, key: str, record: IdempotencyRecord) -> None:
        self._table.upsert_entity(_entity(scope, key, record), mode=UpdateMode.REPLACE)

    @translated(TABLE_STORAGE)
    def release(self, scope: str, key: str, record: IdempotencyRecord) -> None:
        # Changed since (another request took the key over): it is theirs now.
        with contextlib.suppress(ResourceModifiedError):
            self._table.delete_entity(
                table_key(scope),
                table_key(key),
                etag=record.version,
                match_condition=MatchConditions.IfNotModified,
            )


def _entity(scope: str, key: str, record: IdempotencyRecord) -> dict[str, Any]:
    entity: dict[str, Any] = {
        "PartitionKey": table_key(scope),
        "RowKey": table_key(key),
        "scope": scope,
        "key": key,
        "fingerprint": record.fingerprint,
        "started_at": record.started_at,
    }
    if record.result is not None:
        entity["result"] = json.dumps(dict(record.result), separators=(",", ":"))
    return entity


def _record(entity: TableEntity) -> IdempotencyRecord:
    result = entity.get("result")
    return IdempotencyRecord(
        fingerprint=entity["fingerprint"],
        started_at=entity["started_at"],
        result=json.loads(result) if result else None,
        version=str(entity.metadata["etag"]),
    )


def _with_version(record: IdempotencyRecord, response: dict[str, Any]) -> IdempotencyRecord:
    return IdempotencyRecord(
        record.fingerprint, record.started_at, record.result, version=str(response["etag"])
    )
