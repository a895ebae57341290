"""The manifests of product import jobs in Table Storage (table ``importjobs``).

The Spark job saves them (its wheel ships ``shared``) once it has sent a job's rows; the
function app reads them for GET /api/imports/{job_id}. One entity per job: PartitionKey =
``table_key(job id)``, RowKey ``manifest``; saving again replaces it, so a re-run of the same
job keeps one manifest. The job's sessions are kept as JSON, spread over ``sessions``,
``sessions_1``, ... when they outgrow one string property.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableClient, UpdateMode

from ..domain.import_jobs import JobManifest, ManifestNotFound
from ..domain.pipelines.product_import import IMPORT_JOBS_TABLE as IMPORT_JOBS_TABLE
from .azure_errors import TABLE_STORAGE, translated
from .table_keys import table_key

_ROW_KEY = "manifest"
# A string property holds at most 64 KiB (32K UTF-16 characters): thousands of sessions are
# spread over sessions, sessions_1, sessions_2... (an entity holds up to 1 MiB).
_CHUNK = 30_000


class TableManifestStore:
    """Implements ImportManifests (and the Spark job's save)."""

    def __init__(self, table: TableClient) -> None:
        self._table = table

    @translated(TABLE_STORAGE)
    def save(self, manifest: JobManifest) -> None:
        """Insert or replace the manifest of ``manifest.job_id``."""
        self._table.upsert_entity(manifest_entity(manifest), mode=UpdateMode.REPLACE)

    @translated(TABLE_STORAGE)
    def get(self, job_id: str) -> JobManifest:
        """The manifest of ``job_id``; raises ``ManifestNotFound`` when there is none."""
        try:
            entity = self._table.get_entity(table_key(job_id), _ROW_KEY)
        except ResourceNotFoundError as error:
            raise ManifestNotFound(job_id) from error
        return manifest_of(entity)

    @translated(TABLE_STORAGE)
    def list_manifests(self, *, up_to: int) -> list[JobManifest]:
        entities = self._table.query_entities(
            "RowKey eq @row", parameters={"row": _ROW_KEY}, results_per_page=min(up_to, 1000)
        )
        return [manifest_of(entity) for entity in itertools.islice(entities, up_to)]


def manifest_entity(manifest: JobManifest) -> dict[str, Any]:
    return {
        "PartitionKey": table_key(manifest.job_id),
        "RowKey": _ROW_KEY,
        "job_id": manifest.job_id,
        "queue_name": manifest.queue_name,
        "rows_read": manifest.rows_read,
        "rows_rejected": manifest.rows_rejected,
        "rows_sent": manifest.rows_sent,
        "session_count": manifest.session_count,
        "source": manifest.source,
        "status": manifest.status,
        "trace_id": manifest.trace_id,
        **_chunked(json.dumps(manifest.sessions, sort_keys=True, separators=(",", ":"))),
    }


def manifest_of(entity: Any) -> JobManifest:
    return JobManifest(
        job_id=entity["job_id"],
        queue_name=entity.get("queue_name", ""),
        rows_read=int(entity["rows_read"]),
        rows_rejected=int(entity["rows_rejected"]),
        rows_sent=int(entity["rows_sent"]),
        sessions={k: int(v) for k, v in json.loads(_joined(entity) or "{}").items()},
        source=entity.get("source", ""),
        status=entity.get("status", "sent"),
        trace_id=entity.get("trace_id"),
    )


def _chunked(text: str) -> dict[str, str]:
    parts = [text[i : i + _CHUNK] for i in range(0, len(text), _CHUNK)] or [""]
    return {("sessions" if n == 0 else f"sessions_{n}"): part for n, part in enumerate(parts)}


def _joined(entity: Any) -> str:
    parts = [entity.get("sessions") or ""]
    n = 1
    while f"sessions_{n}" in entity:
        parts.append(entity[f"sessions_{n}"])
        n += 1
    return "".join(parts)
