"""POST /api/orders retried with the same Idempotency-Key across a deploy: the first request
ran under the release before purchases' job ids were derived as every pipeline's, sent its
five messages and died before it stored its response. The retry, on this release, takes its
key over and must send the same message ids, so that Service Bus duplicate detection drops
them: one order, not two. Real parts: the function with a real ``azure.functions`` request,
the Idempotency-Key records and the order progress on Azurite, the purchase queue on the
project's emulator (duplicate detection on, as in Azure)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import azure.functions as func
import pytest
from azure.data.tables import TableServiceClient
from azure.servicebus import ServiceBusClient

from servicebus_emulator.testing import run_emulator
from shared.adapters.servicebus_sender import ServiceBusTaskSender
from shared.adapters.table_idempotency import TableIdempotencyRecords
from shared.adapters.table_order_progress import TableOrderProgress
from shared.domain.idempotency import IdempotencyRecord, fingerprint
from shared.domain.orders import parse_order
from shared.domain.pipelines import purchase_messages
from shared.entrypoints.orders_http import submit_order_http
from tests.builders import order_document

from .conftest import StorageApp

pytestmark = pytest.mark.integration

CONFIG = Path(__file__).resolve().parents[2] / "infra" / "local" / "config.json"
QUEUE = "purchase-tasks"
ORDER = order_document()
# How the release before derived a purchase's job id from its Idempotency-Key.
EARLIER_NAMESPACE = uuid.UUID("6f1c6f55-6a55-4f1e-9d55-3c3f0d5c2a11")


@pytest.fixture
def bus(
    storage_app: StorageApp, azurite_connection_string: str
) -> Iterator[tuple[object, ServiceBusClient]]:
    """The container's task sender on a fresh emulator with the app's queues; its order
    progress on Azurite."""
    tables = TableServiceClient.from_connection_string(azurite_connection_string)
    progress = tables.create_table(f"orderprogress{uuid.uuid4().hex[:12]}")
    with run_emulator(CONFIG) as emulator:
        client = ServiceBusClient.from_connection_string(emulator.connection_string)
        storage_app.container.override(
            task_sender=ServiceBusTaskSender(client), order_progress=TableOrderProgress(progress)
        )
        with client:
            yield emulator, client
    tables.delete_table(progress.table_name)


def test_a_purchase_retried_across_the_deploy_keeps_its_job_id(
    storage_app: StorageApp, bus: tuple[object, ServiceBusClient]
) -> None:
    emulator, client = bus
    c = storage_app.container
    key = f"order-{uuid.uuid4()}"
    earlier_job_id = str(uuid.uuid5(EARLIER_NAMESPACE, key))
    # Given: the earlier release's request with the key, 10 minutes ago: its record in flight,
    # its five messages sent, the order recorded as accepted, and then it died
    payload = parse_order(ORDER).to_payload()
    started_at = (datetime.now(UTC) - timedelta(minutes=10)).isoformat()
    assert isinstance(c.idempotency_records, TableIdempotencyRecords)
    c.idempotency_records.start("orders", key, IdempotencyRecord(fingerprint(payload), started_at))
    ServiceBusTaskSender(client).send_session(
        QUEUE, earlier_job_id, purchase_messages(earlier_job_id, parse_order(ORDER))
    )
    c.order_progress.accept(earlier_job_id, earlier_job_id, started_at)

    # When: the client retries it on this release, once the record's lease has run out
    response = submit_order_http(
        func.HttpRequest(
            method="POST",
            url="http://localhost:7071/api/orders",
            headers={"Content-Type": "application/json", "Idempotency-Key": key},
            body=json.dumps(ORDER).encode(),
        )
    )

    # Then: the queue holds the order's five messages once, and the order keeps its job id
    assert response.status_code == 202, response.get_body()
    counts = emulator.counts()[QUEUE]  # type: ignore[attr-defined]
    assert (counts["active"], counts["sessions"]) == (5, 1)
    assert json.loads(response.get_body())["job_id"] == earlier_job_id
