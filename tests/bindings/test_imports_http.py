"""GET /api/imports/{job_id}, called with real azure.functions requests; the manifest and the
recorded rows in real Azurite tables."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import azure.functions as func
import pytest

from shared.adapters.azure_clients import table_service
from shared.adapters.table_import_manifests import TableManifestStore
from shared.adapters.table_import_progress import TableImportProgress
from shared.bootstrap import Container, use_container
from shared.config import StorageConnectionSettings
from shared.domain.import_jobs import JobManifest
from shared.entrypoints.imports_http import get_import
from tests.builders import APP_SETTINGS, app_settings
from tests.outages import unreachable_tables

from .conftest import host_route_value

pytestmark = pytest.mark.integration

JOB = "catalogue/2026#11%41"  # characters a table key cannot hold as they are


@dataclass
class ImportStores:
    container: Container
    manifests: TableManifestStore
    progress: TableImportProgress


@pytest.fixture
def stores(azurite_connection_string: str) -> Iterator[ImportStores]:
    tables = table_service(StorageConnectionSettings(connection_string=azurite_connection_string))
    suffix = uuid.uuid4().hex[:12]
    names = (f"importjobs{suffix}", f"importprogress{suffix}")
    jobs, progress = (tables.create_table(name) for name in names)
    c = Container(app_settings({**APP_SETTINGS, "AzureWebJobsStorage": azurite_connection_string}))
    stores = ImportStores(c, TableManifestStore(jobs), TableImportProgress(progress))
    c.override(import_manifests=stores.manifests, import_progress=stores.progress)
    use_container(c)
    try:
        yield stores
    finally:
        use_container(None)
        for name in names:
            tables.delete_table(name)


def _get(job_id: str) -> func.HttpResponse:
    request = func.HttpRequest(
        method="GET",
        url=f"http://localhost:7071/api/imports/{quote(job_id, safe='')}",
        route_params={"job_id": host_route_value(job_id)},
        body=b"",
    )
    response: func.HttpResponse = get_import(request)
    return response


def _json(response: func.HttpResponse) -> Any:
    assert response.mimetype == "application/json"
    return json.loads(response.get_body())


def _record(stores: ImportStores, imported: int, failed: int) -> None:
    for step in range(1, imported + failed + 1):
        stores.progress.record(
            JOB,
            f"{JOB}-0000",
            step,
            status="imported" if step <= imported else "failed",
            reason=None if step <= imported else "InvalidRow",
        )


def test_a_job_reports_rows_read_rejected_sent_imported_failed_and_pending(
    stores: ImportStores,
) -> None:
    stores.manifests.save(
        JobManifest(JOB, "product-import-tasks", 12, 2, 10, {f"{JOB}-0000": 10}, "in.csv")
    )
    _record(stores, imported=6, failed=1)

    response = _get(JOB)

    assert response.status_code == 200
    assert _json(response) == {
        "job_id": JOB,
        "status": "importing",
        "rows_read": 12,
        "rows_rejected": 2,
        "rows_sent": 10,
        "rows_imported": 6,
        "rows_failed": 1,
        "rows_pending": 3,
        "sessions": 1,
        "queue_name": "product-import-tasks",
        "source": "in.csv",
    }


def test_a_job_is_completed_once_every_sent_row_has_an_outcome(stores: ImportStores) -> None:
    stores.manifests.save(JobManifest(JOB, "q", 10, 0, 10, {f"{JOB}-0000": 10}))
    _record(stores, imported=8, failed=2)

    document = _json(_get(JOB))

    assert (document["status"], document["rows_imported"], document["rows_failed"]) == (
        "completed",
        8,
        2,
    )


def test_a_job_still_sending_has_no_manifest_yet_but_reports_its_rows(
    stores: ImportStores,
) -> None:
    _record(stores, imported=2, failed=0)

    document = _json(_get(JOB))

    assert document["status"] == "sending"
    assert document["rows_imported"] == 2
    assert document["rows_sent"] is None


def test_an_unknown_job_is_a_404_problem(stores: ImportStores) -> None:
    response = _get("never-ran")

    assert response.status_code == 404
    assert response.headers["Content-Type"] == "application/problem+json"
    document = json.loads(response.get_body())
    assert document["status"] == 404
    assert "'never-ran'" in document["detail"]


def test_storage_out_of_reach_is_a_503_problem(stores: ImportStores) -> None:
    stores.container.override(
        import_manifests=TableManifestStore(unreachable_tables().get_table_client("importjobs"))
    )

    response = _get(JOB)

    assert response.status_code == 503
    assert response.headers["Retry-After"] == "30"
    assert json.loads(response.get_body())["status"] == 503
