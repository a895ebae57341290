"""The status of a product import on a real Azurite: the manifest as the Spark job saves it,
the rows as the import tasks record them, read back as GET /api/imports/{job_id} reads them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from azure.data.tables import TableClient, TableServiceClient

from shared.adapters.table_import_manifests import TableManifestStore
from shared.adapters.table_import_progress import TableImportProgress
from shared.domain.import_jobs import ImportJobNotFound, JobManifest
from shared.domain.pipelines import PRODUCT_IMPORT, import_message
from shared.service_layer.import_tasks import import_tasks
from shared.service_layer.imports import get_import_status
from shared.service_layer.observers import import_progress_observer
from shared.service_layer.processor import FailurePolicy, IncomingMessage, SessionProcessor
from spark_jobs.product_import import manifest as spark_manifest
from tests.fakes import InMemoryProductCatalog, InMemorySessionActions

pytestmark = pytest.mark.integration

JOB = "catalogue/2026#11"


@pytest.fixture
def two_tables(table_service_client: TableServiceClient) -> Iterator[tuple[TableClient, ...]]:
    names = [f"t{uuid.uuid4().hex}" for _ in range(2)]
    yield tuple(table_service_client.create_table(name) for name in names)
    for name in names:
        table_service_client.delete_table(name)


def _import(progress: TableImportProgress, sessions: dict[str, list[dict[str, str]]]) -> None:
    processor = SessionProcessor(
        pipeline=PRODUCT_IMPORT,
        tasks=import_tasks(InMemoryProductCatalog()),
        policy=FailurePolicy.CONTINUE_ON_FAILURE,
        observer=import_progress_observer(progress),
    )
    for session, rows in sessions.items():
        actions = InMemorySessionActions()
        for step, row in enumerate(rows, 1):
            body = import_message(JOB, step, is_last=step == len(rows), row=row).to_json()
            processor.handle(IncomingMessage(body=body, session_id=session), actions)


GOOD = {"sku": "A", "name": "Apple", "price": "1.00", "currency": "EUR"}
NO_PRICE = {"sku": "B", "name": "Banana", "currency": "EUR"}


def test_the_status_adds_the_rows_the_tasks_recorded_to_the_spark_jobs_manifest(
    two_tables: tuple[TableClient, ...],
) -> None:
    jobs, rows = two_tables
    manifests, progress = TableManifestStore(jobs), TableImportProgress(rows)
    sessions = {f"{JOB}-0000": [GOOD, NO_PRICE, GOOD], f"{JOB}-0001": [GOOD, GOOD]}

    _import(progress, {f"{JOB}-0000": sessions[f"{JOB}-0000"]})  # while the job still sends
    assert get_import_status(manifests, progress, JOB).status == "sending"

    # The Spark job saves its manifest through the same module, imported its own way.
    spark_manifest.TableManifestStore(jobs).save(
        spark_manifest.JobManifest(
            JOB, "product-import-tasks", 7, 2, 5, {s: len(r) for s, r in sessions.items()}
        )
    )
    assert get_import_status(manifests, progress, JOB).rows_pending == 2

    _import(progress, {f"{JOB}-0001": sessions[f"{JOB}-0001"]})
    status = get_import_status(manifests, progress, JOB)

    assert status.status == "completed"
    assert (status.rows_read, status.rows_rejected, status.rows_sent) == (7, 2, 5)
    assert (status.rows_imported, status.rows_failed, status.rows_pending) == (4, 1, 0)
    assert status.sessions == 2


def test_an_unknown_job_is_not_found(two_tables: tuple[TableClient, ...]) -> None:
    jobs, rows = two_tables
    with pytest.raises(ImportJobNotFound):
        get_import_status(TableManifestStore(jobs), TableImportProgress(rows), "never-ran")


def test_the_spark_job_and_the_app_share_one_manifest_schema() -> None:
    assert spark_manifest.TableManifestStore is TableManifestStore
    assert spark_manifest.JobManifest is JobManifest
