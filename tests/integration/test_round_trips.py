"""How many Service Bus operations and Storage requests each task message costs, measured on
the emulator (through the host's Settlement service) and Azurite, against the table in
docs/processor.md: a redundant read or write shows up here as a changed count."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from azure.data.tables import TableServiceClient
from azure.servicebus import ServiceBusClient
from azure.storage.blob import BlobServiceClient

from localdev.email_http import RunningEmailService, run_email_service
from shared.adapters.acs_email import AcsEmailSender, email_client
from shared.adapters.azure_clients import (
    DEAD_LETTER_BODIES_CONTAINER,
    DEAD_LETTERS_TABLE,
    FAILED_SESSIONS_TABLE,
    IMPORT_PROGRESS_TABLE,
    ORDER_NUMBERS_TABLE,
    PAYMENTS_TABLE,
    PRODUCTS_TABLE,
    RECEIPTS_CONTAINER,
    ensure_storage,
)
from shared.adapters.blob_receipts import BlobReceiptStore
from shared.adapters.pdf_receipts import ReportLabReceiptRenderer
from shared.adapters.simulated_payments import TableSimulatedPaymentGateway
from shared.adapters.table_archive import TableDeadLetterArchive
from shared.adapters.table_import_progress import TableImportProgress
from shared.adapters.table_order_numbers import TableOrderNumbers
from shared.adapters.table_products import TableProductCatalog
from shared.adapters.table_receipt_emails import RECEIPT_EMAILS_TABLE, TableReceiptEmails
from shared.bootstrap.declared import APP_TABLES
from shared.config import EmailServiceConnectionSettings
from shared.domain.envelope import TaskMessage
from shared.domain.orders import parse_order
from shared.domain.pipelines import (
    PRODUCT_IMPORT,
    PURCHASE,
    PURCHASE_TASKS,
    import_message,
    purchase_messages,
)
from shared.service_layer.observers import import_progress_observer
from shared.service_layer.ports import SessionActions
from shared.service_layer.processor import RetryPolicy, SessionProcessor
from shared.service_layer.product_import_tasks import import_tasks
from shared.service_layer.purchase_tasks import PurchaseDependencies, purchase_tasks
from shared.service_layer.receipt_mailer import ReceiptMailer
from tests.builders import PIPELINES, order_document

from .servicebus import SessionRunner, send_tasks

pytestmark = pytest.mark.integration

DOC = Path(__file__).resolve().parents[2] / "docs" / "processor.md"
DECLINED = "tok_declined"


class StorageRequests:
    """Counts every HTTP request a Storage client sends, retries included (its
    ``raw_request_hook``, which the clients it makes share)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, request: Any) -> None:
        self.count += 1


class Metered:
    """Wraps each message's ``SessionActions`` (``SessionRunner.run(wrap=...)``) and keeps, per
    message in delivery order, the calls made through them (each one Service Bus operation)
    and the Storage requests sent while the message was handled."""

    def __init__(self, storage: StorageRequests) -> None:
        self._storage = storage
        self._calls: list[list[str]] = []
        self._starts: list[int] = []

    def __call__(self, actions: SessionActions) -> SessionActions:
        calls: list[str] = []
        self._calls.append(calls)
        self._starts.append(self._storage.count)

        class Counted:
            def __getattr__(self, name: str) -> Any:
                operation = getattr(actions, name)

                def call(*args: Any) -> Any:
                    calls.append(name)
                    return operation(*args)

                return call

        return Counted()

    def per_message(self) -> list[tuple[int, int]]:
        """(Service Bus operations, Storage requests) of each message so far."""
        ends = [*self._starts[1:], self._storage.count]
        return [
            (len(calls), end - start)
            for calls, start, end in zip(self._calls, self._starts, ends, strict=True)
        ]


def documented() -> dict[str, tuple[int, int]]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Round trips per task message", 1)[1]
    rows = re.findall(r"^\| (?!Message|---)([^|]+?) \| (\d+) \| (\d+) \|", section, re.MULTILINE)
    return {label.strip(): (int(sb), int(storage)) for label, sb, storage in rows}


@pytest.fixture
def email_service() -> Iterator[RunningEmailService]:
    """The local Azure Communication Services Email (the receipts' sender in Azure)."""
    with run_email_service() as running:
        yield running


def test_each_task_message_costs_the_round_trips_the_processor_doc_lists(
    azurite_connection_string: str,
    servicebus_client: ServiceBusClient,
    session_runner: SessionRunner,
    session_queue: str,
    email_service: RunningEmailService,
) -> None:
    storage = StorageRequests()
    tables = TableServiceClient.from_connection_string(
        azurite_connection_string, raw_request_hook=storage
    )
    blobs = BlobServiceClient.from_connection_string(
        azurite_connection_string, raw_request_hook=storage
    )
    ensure_storage(tables, blobs, tables=APP_TABLES)
    catalog = TableProductCatalog(tables.get_table_client(PRODUCTS_TABLE))
    order_numbers = TableOrderNumbers(tables.get_table_client(ORDER_NUMBERS_TABLE))
    payments = TableSimulatedPaymentGateway(
        tables.get_table_client(PAYMENTS_TABLE), decline_tokens=frozenset({DECLINED}), refresh=600
    )
    # As in a worker that has taken orders already: the allocator knows the counter it last
    # wrote, and the provider has its outage switch (read by time, not per charge: here once).
    order_numbers.allocate(f"earlier-{uuid.uuid4()}")
    payments.charge(
        idempotency_key=str(uuid.uuid4()), card_token="tok_visa", amount=Decimal(1), currency="EUR"
    )
    processors = {
        PRODUCT_IMPORT: SessionProcessor(
            pipeline=PRODUCT_IMPORT,
            tasks=import_tasks(catalog),
            policy=PIPELINES.policy(PRODUCT_IMPORT),
            observer=import_progress_observer(
                TableImportProgress(tables.get_table_client(IMPORT_PROGRESS_TABLE))
            ),
        ),
        PURCHASE: SessionProcessor(
            pipeline=PURCHASE,
            policy=PIPELINES.policy(PURCHASE),
            tasks=purchase_tasks(
                PurchaseDependencies(
                    order_numbers=order_numbers,
                    catalog=catalog,
                    payments=payments,
                    receipts=BlobReceiptStore(blobs.get_container_client(RECEIPTS_CONTAINER)),
                    renderer=ReportLabReceiptRenderer(),
                    mailer=ReceiptMailer(
                        TableReceiptEmails(tables.get_table_client(RECEIPT_EMAILS_TABLE)),
                        AcsEmailSender(
                            email_client(
                                EmailServiceConnectionSettings(
                                    connection_string=email_service.connection_string
                                )
                            ),
                            sender="DoNotReply@shop.example",
                            endpoint=email_service.endpoint,
                        ),
                    ),
                    tax_rate=Decimal("0.25"),
                    shipping_fee=Decimal("4.95"),
                )
            ),
            retry=RetryPolicy(window=0, min_backoff=0, max_backoff=0),
            journal=TableDeadLetterArchive(
                tables.get_table_client(DEAD_LETTERS_TABLE),
                tables.get_table_client(FAILED_SESSIONS_TABLE),
                blobs.get_container_client(DEAD_LETTER_BODIES_CONTAINER),
            ),
        ),
    }
    run = uuid.uuid4().hex[:8]
    sku = f"RT-{run}"

    def measure(pipeline: str, session_id: str, messages: list[TaskMessage]) -> list[Any]:
        meter = Metered(storage)
        send_tasks(servicebus_client, session_queue, session_id, messages)
        session_runner.run(session_queue, session_id, processors[pipeline], wrap=meter)
        return meter.per_message()

    rows = [{"sku": s, "name": "Tea", "price": "3.00", "currency": "EUR"} for s in (sku, sku)]
    imported = measure(
        PRODUCT_IMPORT,
        f"import-{run}",
        [import_message(f"i-{run}", n, is_last=n == 2, row=row) for n, row in enumerate(rows, 1)],
    )

    def order(card: str) -> Any:
        return parse_order(order_document(card_token=card, lines=[{"sku": sku, "quantity": 2}]))

    paid = measure(PURCHASE, f"ok-{run}", purchase_messages(f"ok-{run}", order("tok_visa")))
    declined = measure(PURCHASE, f"no-{run}", purchase_messages(f"no-{run}", order(DECLINED)))

    measured = {
        "`ImportProduct`, not the last row": imported[0],
        "`ImportProduct`, the last row": imported[1],
        **{
            f"`{task}`" + (" (the last)" if task == PURCHASE_TASKS[-1] else ""): counts
            for task, counts in zip(PURCHASE_TASKS, paid, strict=True)
        },
        "`ProcessPayment`, card declined": declined[2],
        "a later task of a failed purchase": declined[3],
        "the last task of a failed purchase": declined[4],
    }
    assert declined[:2] == paid[:2]
    assert len(email_service.received()) == 1  # the paid order's receipt, nothing for the other
    assert measured == documented()
