"""The status of a product import on a real Azurite: the manifest as the Spark job saves it,
the rows as the import tasks record them (writing the products to a real catalogue table), read
back as GET /api/imports/{job_id} reads them. The one twin is the session's settlement
(``InMemorySessionActions``): what the broker does with the messages is for the local host's
own tests (packages/functions-local-host/tests)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from azure.data.tables import TableClient, TableServiceClient

from shared.adapters.table_import_manifests import TableManifestStore
from shared.adapters.table_import_progress import TableImportProgress
from shared.adapters.table_products import TableProductCatalog
from shared.domain.import_jobs import ImportJobNotFound, JobManifest
from shared.domain.pipelines import PRODUCT_IMPORT, import_message
from shared.service_layer.imports import get_import_status
from shared.service_layer.observers import import_progress_observer
from shared.service_layer.processor import FailurePolicy, IncomingMessage, SessionProcessor
from shared.service_layer.product_import_tasks import import_tasks
from spark_jobs.product_import import manifest as spark_manifest
from tests.fakes import InMemorySessionActions

pytestmark = pytest.mark.integration

JOB = "catalogue/2026#11"


@pytest.fixture
def three_tables(table_service_client: TableServiceClient) -> Iterator[tuple[TableClient, ...]]:
    """The job manifests, the import progress and the catalogue the tasks write products to."""
    names = [f"t{uuid.uuid4().hex}" for _ in range(3)]
    yield tuple(table_service_client.create_table(name) for name in names)
    for name in names:
        table_service_client.delete_table(name)


def _import(
    progress: TableImportProgress,
    catalogue: TableProductCatalog,
    sessions: dict[str, list[dict[str, str]]],
) -> None:
    """Each row through the processor and the import task, as the session trigger runs them;
    the session's settlement is the in-memory twin (the broker side is the local host's own
    tests')."""
    processor = SessionProcessor(
        pipeline=PRODUCT_IMPORT,
        tasks=import_tasks(catalogue),
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
    three_tables: tuple[TableClient, ...],
) -> None:
    jobs, rows, products = three_tables
    manifests, progress = TableManifestStore(jobs), TableImportProgress(rows)
    catalogue = TableProductCatalog(products)
    sessions = {f"{JOB}-0000": [GOOD, NO_PRICE, GOOD], f"{JOB}-0001": [GOOD, GOOD]}

    _import(progress, catalogue, {f"{JOB}-0000": sessions[f"{JOB}-0000"]})  # the job still sends
    assert get_import_status(manifests, progress, JOB).status == "sending"

    # The Spark job saves its manifest through the same module, imported its own way.
    spark_manifest.TableManifestStore(jobs).save(
        spark_manifest.JobManifest(
            JOB, "product-import-tasks", 7, 2, 5, {s: len(r) for s, r in sessions.items()}
        )
    )
    assert get_import_status(manifests, progress, JOB).rows_pending == 2

    _import(progress, catalogue, {f"{JOB}-0001": sessions[f"{JOB}-0001"]})
    assert catalogue.find(["A"])["A"].name == "Apple"  # the tasks wrote the good rows
    status = get_import_status(manifests, progress, JOB)

    assert status.status == "completed"
    assert (status.rows_read, status.rows_rejected, status.rows_sent) == (7, 2, 5)
    assert (status.rows_imported, status.rows_failed, status.rows_pending) == (4, 1, 0)
    assert status.sessions == 2


def test_an_unknown_job_is_not_found(three_tables: tuple[TableClient, ...]) -> None:
    jobs, rows, _ = three_tables
    with pytest.raises(ImportJobNotFound):
        get_import_status(TableManifestStore(jobs), TableImportProgress(rows), "never-ran")


def test_the_spark_job_and_the_app_share_one_manifest_schema() -> None:
    assert spark_manifest.TableManifestStore is TableManifestStore
    assert spark_manifest.JobManifest is JobManifest
