"""Operators' pauses of pipelines in Table Storage (table ``pipelinepauses``): one entity per
paused pipeline (PartitionKey ``pause``, RowKey the pipeline's name), deleted when it resumes.
Pausing inserts, so of two operators pausing at once the first keeps the pause (its author and
note) and the second is told of it."""

from __future__ import annotations

from typing import Any

from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.data.tables import TableClient

from ..domain.pauses import ManualPause
from .azure_errors import TABLE_STORAGE, translated

PIPELINE_PAUSES_TABLE = "pipelinepauses"
_PARTITION = "pause"


class TablePipelinePauses:
    """Implements PipelinePauses."""

    def __init__(self, table: TableClient) -> None:
        self._table = table

    @translated(TABLE_STORAGE)
    def find(self, pipeline: str) -> ManualPause | None:
        try:
            return _pause(self._table.get_entity(_PARTITION, pipeline))
        except ResourceNotFoundError:
            return None

    @translated(TABLE_STORAGE)
    def pause(self, pipeline: str, pause: ManualPause) -> ManualPause:
        entity = {
            "PartitionKey": _PARTITION,
            "RowKey": pipeline,
            "by": pause.by,
            "note": pause.note,
            "at": pause.at,
        }
        try:
            self._table.create_entity(entity)
        except ResourceExistsError:
            found = self.find(pipeline)
            return found if found is not None else self.pause(pipeline, pause)
        return pause

    @translated(TABLE_STORAGE)
    def resume(self, pipeline: str) -> ManualPause | None:
        pause = self.find(pipeline)
        if pause is not None:
            self._table.delete_entity(_PARTITION, pipeline)
        return pause


def _pause(entity: Any) -> ManualPause:
    return ManualPause(by=str(entity["by"]), note=str(entity["note"]), at=str(entity["at"]))
