"""How each session ended, in Table Storage (table ``sessionoutcomes``): PartitionKey = the
job, RowKey = the session, so a job's sessions (the first and its replays) are one partition
read and a session's outcome recorded again overwrites itself."""

from __future__ import annotations

import contextlib
import json
import threading
from itertools import islice
from typing import Any, cast

from azure.core import MatchConditions
from azure.core.exceptions import (
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
)
from azure.data.tables import TableClient, UpdateMode

from ..domain.session_outcomes import ACCEPTED, SessionOutcome, SessionStatus
from .azure_errors import TABLE_STORAGE, translated
from .table_keys import table_key
from .table_snapshots import TableSnapshot

SESSION_OUTCOMES_TABLE = "sessionoutcomes"


class TableSessionOutcomes:
    """Implements SessionOutcomes."""

    def __init__(self, table: TableClient) -> None:
        self._table = table
        # By pipeline: the snapshot latest_of_pipeline reads, and each job's latest session.
        self._snapshots: dict[str, TableSnapshot] = {}
        self._latest: dict[str, dict[str, SessionOutcome]] = {}
        self._reading = threading.Lock()

    @translated(TABLE_STORAGE)
    def record(self, outcome: SessionOutcome) -> None:
        self._table.upsert_entity(_entity(outcome), mode=UpdateMode.REPLACE)

    @translated(TABLE_STORAGE)
    def accept(self, outcome: SessionOutcome) -> None:
        with contextlib.suppress(ResourceExistsError):
            self._table.create_entity(_entity(outcome))

    @translated(TABLE_STORAGE)
    def withdraw(self, job_id: str, session_id: str) -> None:
        try:
            entity = self._table.get_entity(table_key(job_id), table_key(session_id))
        except ResourceNotFoundError:
            return
        if _outcome(entity).status != ACCEPTED:
            return  # the session ran: its outcome stays
        with contextlib.suppress(ResourceModifiedError):  # it just ended after all
            self._table.delete_entity(
                entity["PartitionKey"],
                entity["RowKey"],
                etag=entity.metadata["etag"],
                match_condition=MatchConditions.IfNotModified,
            )

    @translated(TABLE_STORAGE)
    def find(self, job_id: str, session_id: str) -> SessionOutcome | None:
        try:
            entity = self._table.get_entity(table_key(job_id), table_key(session_id))
        except ResourceNotFoundError:
            return None
        return _outcome(entity)

    @translated(TABLE_STORAGE)
    def of_job(self, job_id: str) -> list[SessionOutcome]:
        entities = self._table.query_entities(
            "PartitionKey eq @pk", parameters={"pk": table_key(job_id)}
        )
        return sorted((_outcome(e) for e in entities), key=lambda o: (o.at, o.session_id))

    @translated(TABLE_STORAGE)
    def of_pipeline(self, pipeline: str, *, up_to: int) -> list[SessionOutcome]:
        entities = self._table.query_entities(
            "pipeline eq @pipeline", parameters={"pipeline": pipeline}, results_per_page=1000
        )
        return [_outcome(entity) for entity in islice(entities, up_to)]

    @translated(TABLE_STORAGE)
    def latest_of_pipeline(self, pipeline: str, *, up_to: int) -> dict[str, SessionOutcome]:
        """Read whole once, then only the rows written since (``TableSnapshot``), for the jobs
        with the ``up_to`` smallest keys."""
        with self._reading:
            snapshot = self._snapshots.get(pipeline)
            if snapshot is None or snapshot.limit < up_to:
                snapshot = self._snapshots[pipeline] = TableSnapshot(
                    self._table,
                    where="pipeline eq @pipeline",
                    parameters={"pipeline": pipeline},
                    partitions=up_to,
                )
                self._latest[pipeline] = {}
            latest = self._latest[pipeline]
            with snapshot.refreshed() as (partitions, changed):
                for partition in changed:
                    sessions = [_outcome(row) for row in partitions[partition].values()]
                    latest[partition] = max(sessions, key=lambda o: (o.at, o.session_id))
                for gone in latest.keys() - partitions.keys():
                    del latest[gone]
                kept = sorted(latest)[:up_to]
            return {latest[key].job_id: latest[key] for key in kept}


def _entity(outcome: SessionOutcome) -> dict[str, Any]:
    entity: dict[str, Any] = {
        "PartitionKey": table_key(outcome.job_id),
        "RowKey": table_key(outcome.session_id),
        "job_id": outcome.job_id,
        "session_id": outcome.session_id,
        "pipeline": outcome.pipeline,
        "status": outcome.status,
        "at": outcome.at,
    }
    if outcome.reason:
        entity["reason"] = outcome.reason
    if outcome.outputs:  # only a pipeline that shows outputs writes them
        entity["outputs"] = json.dumps(dict(outcome.outputs), default=str)
    return entity


def _outcome(entity: Any) -> SessionOutcome:
    return SessionOutcome(
        job_id=str(entity["job_id"]),
        session_id=str(entity["session_id"]),
        pipeline=str(entity["pipeline"]),
        status=cast(SessionStatus, entity["status"]),
        at=str(entity["at"]),
        reason=entity.get("reason"),
        outputs=json.loads(entity["outputs"]) if entity.get("outputs") else {},
    )
