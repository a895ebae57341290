"""Bulk replay requests in Table Storage (table ``replayrequests``): one row per request,
PartitionKey ``replay``, RowKey = the request id (a UUID)."""

from __future__ import annotations

import json

from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableClient, UpdateMode

from ..domain.replays import ReplayRequest, ReplayRequestNotFound
from .azure_errors import TABLE_STORAGE, translated


class TableReplayRequests:
    """Implements ReplayRequestStore."""

    PARTITION = "replay"

    def __init__(self, table: TableClient) -> None:
        self._table = table

    @translated(TABLE_STORAGE)
    def save(self, request: ReplayRequest) -> None:
        stored = {name: value for name, value in vars(request).items() if name != "request_id"}
        self._table.upsert_entity(
            {
                **stored,
                "PartitionKey": self.PARTITION,
                "RowKey": request.request_id,
                "errors": json.dumps(list(request.errors)),
                "taken_sessions": json.dumps(list(request.taken_sessions)),
            },
            mode=UpdateMode.REPLACE,
        )

    @translated(TABLE_STORAGE)
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
            taken=entity.get("taken", 0),
            taken_sessions=tuple(json.loads(entity.get("taken_sessions") or "[]")),
            action="resolve" if entity.get("action") == "resolve" else "replay",
            who=entity.get("who") or "",
            note=entity.get("note") or "",
            role=entity.get("role") or "",
            failed_from=entity.get("failed_from"),
            failed_to=entity.get("failed_to"),
        )
