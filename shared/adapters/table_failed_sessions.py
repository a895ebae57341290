"""The failed sessions in Table Storage (table ``failedsessions``): one row per session
(PartitionKey = ``table_key(session id)``, RowKey ``summary``) holding the operator's view, the
processor's failure record (the context a replay needs) and the replay claim. The claim is
written with the row's ETag (``If-Match``), so that of concurrent claims exactly one is
recorded; the other writers merge their own columns and leave it alone.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import ResourceModifiedError, ResourceNotFoundError
from azure.data.tables import TableClient, TableEntity, UpdateMode

from ..domain.archive import (
    FAILED,
    REPLAY,
    RESOLVE,
    RESOLVED,
    FailedSession,
    FailureRecord,
    GroupKey,
    ReplayClaim,
    SessionNotArchived,
    SummaryFilter,
    status_with,
)
from ..domain.errors import Conflict
from ..service_layer.ports import Page
from .azure_errors import TABLE_STORAGE, translated
from .table_batches import decode_token, encode_token
from .table_keys import table_key, value_of_table_key
from .table_snapshots import TableSnapshot

SUMMARY_ROW = "summary"
_CLAIM_ATTEMPTS = 20  # each lost round means another writer changed the row: read it again
_FILTER_COLUMNS = (("queue", "queue"), ("task", "failed_task"), ("reason", "reason"))


class TableFailedSessions:
    """Implements the failed-session half of DeadLetterArchive, and FailureJournal."""

    def __init__(self, sessions: TableClient) -> None:
        self._sessions = sessions
        # What count_sessions reads: each summary's group and status columns.
        self._counted = TableSnapshot(
            sessions,
            where="RowKey eq @row and status ne ''",
            parameters={"row": SUMMARY_ROW},
            select=(
                "queue",
                "failed_task",
                "reason",
                "status",
                "claim_key",
                "claim_action",
                "replay_key",
                "failed_at",
            ),
        )

    @translated(TABLE_STORAGE)
    def record(self, session_id: str, record: FailureRecord) -> None:
        self._sessions.upsert_entity(
            {
                "PartitionKey": table_key(session_id),
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

    @translated(TABLE_STORAGE)
    def find_record(self, session_id: str) -> FailureRecord | None:
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

    @translated(TABLE_STORAGE)
    def save_summary(self, summary: FailedSession) -> None:
        """Merged into the row: the failure record and the claim stay as they are."""
        stored = {name: value for name, value in vars(summary).items() if name != "claim"}
        self._sessions.upsert_entity(
            {
                **stored,
                "PartitionKey": table_key(summary.session_id),
                "RowKey": SUMMARY_ROW,
                "context": json.dumps(dict(summary.context), separators=(",", ":")),
            },
            mode=UpdateMode.MERGE,
        )

    @translated(TABLE_STORAGE)
    def get_summary(self, session_id: str) -> FailedSession:
        entity = self._summary_entity(session_id)
        if entity is None or "status" not in entity:
            raise SessionNotArchived(session_id)
        return _summary(entity)

    @translated(TABLE_STORAGE)
    def claim_replay(self, session_id: str, claim: ReplayClaim) -> ReplayClaim:
        for _ in range(_CLAIM_ATTEMPTS):
            entity = self._summary_entity(session_id)
            if entity is None or "status" not in entity:
                raise SessionNotArchived(session_id)
            held = _claim_of(entity)
            if held is not None:
                return held
            try:
                columns = {
                    "PartitionKey": table_key(session_id),
                    "RowKey": SUMMARY_ROW,
                    "claim_key": claim.key,
                    "claim_session_id": claim.new_session_id,
                    "claimed_at": claim.claimed_at,
                    "claim_action": claim.action,
                }
                if claim.action == RESOLVE:  # out of the failed list at once
                    columns["status"] = RESOLVED
                self._sessions.update_entity(
                    columns,
                    mode=UpdateMode.MERGE,
                    etag=entity.metadata["etag"],
                    match_condition=MatchConditions.IfNotModified,
                )
            except ResourceModifiedError:
                continue  # 412: written since it was read (a claim, an archive run): read again
            return claim
        raise Conflict(
            f"The summary of session {session_id!r} kept changing while a replay tried to claim "
            "it. Try again."
        )

    @translated(TABLE_STORAGE)
    def list_summaries(
        self, selected: SummaryFilter, *, page_size: int = 50, continuation: str | None = None
    ) -> Page[FailedSession]:
        clauses = ["RowKey eq @row", "status ne ''"]
        parameters: dict[str, Any] = {"row": SUMMARY_ROW}
        for name, column in _FILTER_COLUMNS:
            value = getattr(selected, name)
            if value is not None:
                clauses.append(f"{column} eq @{column}")
                parameters[column] = value
        if selected.failed_from is not None:
            clauses.append("failed_at ge @failed_from")
            parameters["failed_from"] = selected.failed_from
        if selected.failed_to is not None:
            clauses.append("failed_at lt @failed_to")
            parameters["failed_to"] = selected.failed_to
        if selected.status == RESOLVED:
            # The claim says so even where an archive run rewrote the status column since.
            clauses.append("claim_action eq @action")
            parameters["action"] = RESOLVE
        elif selected.status is not None:
            clauses.append("status eq @status")
            parameters["status"] = selected.status
        pages: Any = self._sessions.query_entities(
            " and ".join(clauses), parameters=parameters, results_per_page=page_size
        ).by_page(continuation_token=decode_token(continuation))  # type: ignore[arg-type]
        try:
            items = [_summary(entity) for entity in next(pages)]
        except StopIteration:
            items = []
        # A page may come out short: a session resolved while an archive run rewrote its
        # status column is resolved, not failed.
        items = [s for s in items if selected.status in (None, s.status)]
        return Page(items, encode_token(pages.continuation_token))

    @translated(TABLE_STORAGE)
    def count_sessions(self) -> Mapping[GroupKey, int]:
        """From the summaries' group and status columns, read whole once and then only where
        written since (``TableSnapshot``): a page of every session each time took 200 ms
        for a thousand sessions."""
        with self._counted.refreshed() as (partitions, _):
            return Counter(
                (
                    status_with(entity.get("status") or FAILED, _claim_of(entity)),
                    entity.get("queue") or "",
                    entity.get("failed_task"),
                    entity.get("reason") or "",
                )
                for rows in partitions.values()
                for entity in rows.values()
            )

    @translated(TABLE_STORAGE)
    def count_failed_since(self, since: str) -> Mapping[str, int]:
        """From the same snapshot as ``count_sessions``."""
        with self._counted.refreshed() as (partitions, _):
            return Counter(
                entity.get("queue") or ""
                for rows in partitions.values()
                for entity in rows.values()
                if (entity.get("failed_at") or "") >= since
            )

    def _summary_entity(self, session_id: str) -> TableEntity | None:
        try:
            return self._sessions.get_entity(table_key(session_id), SUMMARY_ROW)
        except ResourceNotFoundError:
            return None


def _claim_of(entity: dict[str, Any]) -> ReplayClaim | None:
    if entity.get("claim_key"):
        return ReplayClaim(
            key=entity["claim_key"],
            new_session_id=entity.get("claim_session_id") or "",
            claimed_at=entity.get("claimed_at") or "",
            action=RESOLVE if entity.get("claim_action") == RESOLVE else REPLAY,
        )
    if entity.get("status") == "replayed" and entity.get("replay_key"):
        # Replayed before claims were recorded: that replay holds the session.
        return ReplayClaim(
            key=entity["replay_key"],
            new_session_id=entity.get("replayed_session_id") or "",
            claimed_at=entity.get("replayed_at") or "",
        )
    return None


def _summary(entity: dict[str, Any]) -> FailedSession:
    return FailedSession(
        session_id=entity.get("session_id") or value_of_table_key(entity["PartitionKey"]) or "",
        queue=entity.get("queue") or "",
        failed_task=entity.get("failed_task"),
        failed_step=entity.get("failed_step"),
        reason=entity.get("reason") or "",
        description=entity.get("description") or "",
        failed_at=entity.get("failed_at"),
        message_count=entity.get("message_count") or 0,
        has_last=bool(entity.get("has_last")),
        context=json.loads(entity.get("context") or "{}"),
        status=status_with(entity.get("status") or FAILED, _claim_of(entity)),
        replayed_session_id=entity.get("replayed_session_id"),
        replay_key=entity.get("replay_key"),
        replayed_at=entity.get("replayed_at"),
        claim=_claim_of(entity),
        trace_id=entity.get("trace_id"),
        job_id=entity.get("job_id"),
    )
