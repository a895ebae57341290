"""The operators' audit trail in Table Storage (table ``operatoraudit``): one partition per
failed session (its id, escaped), one row per action, keyed by time so a partition read is
the session's history in order. Entries are inserted, never updated."""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict
from typing import Any

from azure.data.tables import TableClient

from ..domain.audit import AuditEntry, Change, MessageEdit
from .azure_errors import TABLE_STORAGE, translated
from .table_keys import table_key

AUDIT_TABLE = "operatoraudit"


class TableAuditTrail:
    """Implements AuditTrail."""

    def __init__(self, table: TableClient) -> None:
        self._table = table

    @translated(TABLE_STORAGE)
    def record(self, entry: AuditEntry) -> None:
        self._table.create_entity(
            {
                "PartitionKey": table_key(entry.session_id),
                # Time first, so rows sort in the order they happened; the suffix keeps two
                # actions in the same microsecond apart.
                "RowKey": f"{entry.at}|{uuid.uuid4().hex}",
                "session_id": entry.session_id,
                "action": entry.action,
                "who": entry.who,
                "at": entry.at,
                "note": entry.note,
                "new_session_id": entry.new_session_id,
                "edits": json.dumps([asdict(edit) for edit in entry.edits], default=str),
            }
        )

    @translated(TABLE_STORAGE)
    def history(self, session_id: str) -> list[AuditEntry]:
        entities = self._table.query_entities(
            "PartitionKey eq @pk", parameters={"pk": table_key(session_id)}
        )
        return [_entry(e) for e in sorted(entities, key=lambda e: str(e["RowKey"]))]


def _entry(entity: Any) -> AuditEntry:
    return AuditEntry(
        session_id=entity["session_id"],
        action=entity["action"],
        who=entity["who"],
        at=entity["at"],
        note=entity["note"],
        new_session_id=entity.get("new_session_id"),
        edits=tuple(
            MessageEdit(
                row_key=edit["row_key"],
                step=edit.get("step"),
                task=edit.get("task"),
                changes=tuple(Change(**change) for change in edit["changes"]),
            )
            for edit in json.loads(entity.get("edits") or "[]")
        ),
    )
