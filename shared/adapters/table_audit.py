"""The operators' audit trail in Table Storage (table ``operatoraudit``): one partition per
failed session (its id, escaped), one row per action. An entry with a ``key`` is keyed by a
digest of (action, key), so recording it again (a repeated request) finds it there and changes
nothing; the others by a random id. Entries are inserted, never updated; a history is read in
the order of their times."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import uuid
from dataclasses import asdict
from typing import Any

from azure.core.exceptions import ResourceExistsError
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
        if entry.key:
            row_key = hashlib.sha256(f"{entry.action}\n{entry.key}".encode()).hexdigest()
        else:
            row_key = uuid.uuid4().hex
        with contextlib.suppress(ResourceExistsError):  # recorded by an earlier run of it
            self._create(entry, row_key)

    def _create(self, entry: AuditEntry, row_key: str) -> None:
        self._table.create_entity(
            {
                "PartitionKey": table_key(entry.session_id),
                "RowKey": row_key,
                "session_id": entry.session_id,
                "action": entry.action,
                "who": entry.who,
                "at": entry.at,
                "note": entry.note,
                "new_session_id": entry.new_session_id,
                "edits": json.dumps([asdict(edit) for edit in entry.edits], default=str),
                "key": entry.key,
                "role": entry.role,
            }
        )

    @translated(TABLE_STORAGE)
    def history(self, session_id: str) -> list[AuditEntry]:
        entities = self._table.query_entities(
            "PartitionKey eq @pk", parameters={"pk": table_key(session_id)}
        )
        ordered = sorted(entities, key=lambda e: (str(e["at"]), str(e["RowKey"])))
        return [_entry(e) for e in ordered]

    @translated(TABLE_STORAGE)
    def between(self, start: str | None, end: str | None, *, up_to: int) -> list[AuditEntry]:
        clauses, parameters = [], {}
        if start is not None:
            clauses.append("at ge @start")
            parameters["start"] = start
        if end is not None:
            clauses.append("at lt @end")
            parameters["end"] = end
        entities = self._table.query_entities(
            " and ".join(clauses) or "PartitionKey ne ''",
            parameters=parameters,
            results_per_page=min(up_to, 1000),
        )
        return [_entry(e) for e in itertools.islice(entities, up_to)]


def _entry(entity: Any) -> AuditEntry:
    return AuditEntry(
        session_id=entity["session_id"],
        action=entity["action"],
        who=entity["who"],
        at=entity["at"],
        note=entity["note"],
        new_session_id=entity.get("new_session_id"),
        key=entity.get("key") or "",
        role=entity.get("role") or "",
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
