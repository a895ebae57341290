"""Import row outcomes recorded through the processor's observer, on a real Azurite."""

from __future__ import annotations

import pytest
from azure.data.tables import TableClient

from shared.adapters.table_import_progress import TableImportProgress
from shared.domain.pipelines import PRODUCT_IMPORT, import_message
from shared.service_layer.import_tasks import import_tasks
from shared.service_layer.imports import import_progress_observer
from shared.service_layer.processor import FailurePolicy, IncomingMessage, SessionProcessor
from tests.fakes import InMemoryProductCatalog, InMemorySessionActions

pytestmark = pytest.mark.integration


def test_rows_are_counted_once_each_even_when_redelivered(table: TableClient) -> None:
    progress = TableImportProgress(table)
    processor = SessionProcessor(
        pipeline=PRODUCT_IMPORT,
        tasks=import_tasks(InMemoryProductCatalog()),
        policy=FailurePolicy.CONTINUE_ON_FAILURE,
        observer=import_progress_observer(progress),
    )
    rows = [
        {"sku": "A", "name": "Apple", "price": "1.00", "currency": "EUR"},
        {"sku": "B", "name": "Banana", "currency": "EUR"},  # no price
        {"sku": "C", "name": "Cherry", "price": "2.00", "currency": "EUR"},
    ]
    for session in ("job-1-0000", "job-1/0001"):
        actions = InMemorySessionActions()
        for step, row in enumerate(rows, 1):
            body = import_message("job-1", step, is_last=step == 3, row=row).to_json()
            processor.handle(IncomingMessage(body=body, session_id=session), actions)
            # A redelivery after a crash between the state write and the settlement.
            if step == 1:
                processor.handle(IncomingMessage(body=body, session_id=session, attempt=2), actions)
    processor.handle(
        IncomingMessage(
            body=b"not json",
            session_id="job-1-0002",
            application_properties={"job_id": "job-1", "step": 1},
        ),
        InMemorySessionActions(),
    )

    assert progress.counts("job-1") == {"imported": 4, "failed": 3}
    assert progress.counts("other") == {}
