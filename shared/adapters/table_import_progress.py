"""Import row outcomes in Table Storage, PartitionKey = the job and the session
(``<job key>~~<session key>``), so that a job's rows spread over as many partitions as it has
sessions: one partition takes about 2,000 entities a second (docs/capacity.md).

Two kinds of entity share a session's partition:

- a row's own outcome, RowKey ``<session key>~~<step:>09>``: failed rows, replays and rows
  imported one at a time;
- a run of consecutive imported rows (a batch's), RowKey ``<session key>~~<first step:>09>~run``
  with ``first_step`` and ``last_step``: one entity for up to 100 rows, replaced when a
  redelivered batch records a run from the same first step again. It sorts right after its
  first row's own entity, inside the session's range of keys.

Rows written before that layout have PartitionKey = the job alone (row entities only);
``counts`` reads both, and counts a row recorded in both (before the upgrade, then again after
it: a replay or a redelivery) once, with its latest outcome."""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from azure.data.tables import TableClient, TableEntity, UpdateMode

from ..service_layer.ports import RowOutcome
from .azure_errors import TABLE_STORAGE, translated
from .table_keys import table_key

# Operations in one entity-group transaction: Azure Tables' limit (Azurite answers a larger
# one brokenly, so the limit is kept there too).
TRANSACTION_LIMIT = 100
IMPORTED = "imported"
# A run's RowKey is its first row's with this after the step: longer than any row's own
# RowKey of the session (the session key, '~~' and 9 characters), so the two never meet.
RUN_SUFFIX = "~run"


class TableImportProgress:
    """Implements ImportProgress. RowKey = session key + step (a run's: its first step), so a
    redelivered row or batch upserts its own entity and the counts stay exact. Table:
    ``importprogress``. A job's partitions are the keys that start with ``<job key>~~``: one
    range."""

    def __init__(self, table: TableClient) -> None:
        self._table = table

    @translated(TABLE_STORAGE)
    def record(
        self, job_id: str, session_id: str, step: int | None, *, status: str, reason: str | None
    ) -> None:
        row = RowOutcome(job_id, session_id, step, status, reason)
        self._table.upsert_entity(_entity(row), mode=UpdateMode.REPLACE)

    @translated(TABLE_STORAGE)
    def record_many(self, rows: Sequence[RowOutcome]) -> None:
        """One entity-group transaction per partition (a job's session) and 100 rows, the
        most one transaction may hold; a row given twice keeps its last outcome, as a
        transaction may not touch one entity twice. A partition's chunks are written in
        order; a failed one raises, and the rows are recorded again on redelivery."""
        partitions: dict[str, dict[str, dict[str, Any]]] = {}
        for row in rows:
            entity = _entity(row)
            partitions.setdefault(entity["PartitionKey"], {})[entity["RowKey"]] = entity
        for entities in partitions.values():
            listed = list(entities.values())
            for start in range(0, len(listed), TRANSACTION_LIMIT):
                chunk = listed[start : start + TRANSACTION_LIMIT]
                if len(chunk) == 1:
                    self._table.upsert_entity(chunk[0], mode=UpdateMode.REPLACE)
                else:
                    self._table.submit_transaction(
                        [("upsert", entity, {"mode": UpdateMode.REPLACE}) for entity in chunk]
                    )

    @translated(TABLE_STORAGE)
    def record_run(self, job_id: str, session_id: str, first_step: int, last_step: int) -> None:
        """One upsert, whatever the run's length; a run from the same first step replaces it."""
        self._table.upsert_entity(
            {
                "PartitionKey": _session_partition(job_id, session_id),
                "RowKey": f"{_row_key(session_id, first_step)}{RUN_SUFFIX}",
                "status": IMPORTED,
                "session_id": session_id,
                "first_step": first_step,
                "last_step": last_step,
            },
            mode=UpdateMode.REPLACE,
        )

    @translated(TABLE_STORAGE)
    def counts(self, job_id: str, *, session_id: str | None = None) -> dict[str, int]:
        """The job's (or one of its sessions') rows by status, in both layouts, each row once
        (``_counted``). (The SDK substitutes parameters between spaces only, hence the spaces
        inside the parentheses.)"""
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
        entities = self._table.query_entities(
            query, parameters=parameters, select=list(_COUNTED_COLUMNS)
        )
        return _counted(entities)


_COUNTED_COLUMNS = (
    "PartitionKey",
    "session_id",
    "status",
    "step",
    "first_step",
    "last_step",
    "Timestamp",
)


def _counted(entities: Iterable[TableEntity]) -> dict[str, int]:
    """Rows by status, per session: a step's own entity's status when it has one (the latest
    written, when both layouts hold one), else "imported" when any run covers it (the union
    of the runs, so overlapping runs count a row once)."""
    runs: dict[Any, list[tuple[int, int]]] = {}
    # (session, step) -> (when written, status): a row's latest own outcome in either layout
    own: dict[tuple[Any, Any], tuple[datetime, str]] = {}
    for entity in entities:
        # A selected column an entity lacks comes back as None. A session's entities are
        # grouped by its id, in either layout (the legacy partition holds many sessions).
        session = (
            ("session", entity["session_id"])
            if entity.get("session_id") is not None
            else ("partition", entity["PartitionKey"])
        )
        if entity.get("first_step") is not None:
            runs.setdefault(session, []).append((entity["first_step"], entity["last_step"]))
            continue
        written = (entity.metadata.get("timestamp") or _EARLIEST, entity["status"])
        row = (session, entity.get("step"))
        if row not in own or own[row][0] < written[0]:
            own[row] = written
    counts = Counter(status for _, status in own.values())
    own_steps: dict[Any, list[int]] = {}
    for session, step in own:
        if step is not None:
            own_steps.setdefault(session, []).append(step)
    for session, intervals in runs.items():
        counts[IMPORTED] += _covered_without(intervals, sorted(own_steps.get(session, ())))
    return {status: count for status, count in counts.items() if count}


_EARLIEST = datetime.min.replace(tzinfo=UTC)


def _covered_without(intervals: list[tuple[int, int]], steps: list[int]) -> int:
    """How many steps the union of the closed ``intervals`` holds that sorted ``steps`` does
    not."""
    covered, end = 0, None
    for first, last in sorted(intervals):
        if end is not None and first <= end:
            first = end + 1
        if first > last:
            continue
        covered += (
            last - first + 1 - (bisect.bisect_right(steps, last) - bisect.bisect_left(steps, first))
        )
        end = last
    return covered


def _entity(row: RowOutcome) -> dict[str, Any]:
    entity: dict[str, Any] = {
        # '~~' never occurs in an escaped key ('~' is always followed by two hex digits).
        "PartitionKey": _session_partition(row.job_id, row.session_id),
        "RowKey": _row_key(row.session_id, row.step),
        "status": row.status,
        "session_id": row.session_id,
    }
    if row.step is not None:
        entity["step"] = row.step
    if row.reason:
        entity["reason"] = row.reason
    return entity


def _session_partition(job_id: str, session_id: str | None) -> str:
    return f"{table_key(job_id)}~~{table_key(session_id)}"


def _row_key(session_id: str, step: int | None) -> str:
    return f"{table_key(session_id)}~~{step if step is not None else 'x':>09}"
