"""The real app (function_app.py) on the local host, with one session slot per queue and a
sessionIdleTimeout of a minute: the app releases each session when its last message is settled,
so the slot takes the next session at once instead of waiting out the idle timeout for a message
that will never come. And a transient failure is given up on after TASK_MAX_ATTEMPTS attempts,
counted by the app itself, whatever delivery counts the trigger hands over."""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from azure.data.tables import TableClient
from azure.data.tables import TableServiceClient as Tables
from azure.servicebus import ServiceBusClient, ServiceBusSubQueue
from azure.storage.blob import BlobServiceClient

import function_app
from localdev.host import LocalHost
from localdev.stack import MailSink, run_mail_sink
from shared.adapters.azure_clients import PRODUCTS_TABLE, ensure_storage
from shared.adapters.servicebus_sender import to_service_bus_message
from shared.adapters.table_keys import table_key
from shared.bootstrap import use_container
from shared.domain.envelope import TaskMessage
from shared.domain.orders import parse_order
from shared.domain.pipelines import import_message, purchase_messages
from tests.polling import wait_for

from .conftest import APP_IMPORT_QUEUE, APP_PURCHASE_QUEUE

pytestmark = pytest.mark.integration

IDLE_TIMEOUT_SECONDS = 60
# Well inside the idle timeout: a session that is not released holds the only slot for a
# minute, so the next one cannot finish within this.
WITHIN = IDLE_TIMEOUT_SECONDS / 2
TASK_MAX_ATTEMPTS = 3
OUTAGE_CARD = "tok_provider_down"

ONE_SLOT_HOST_JSON: dict[str, Any] = {
    "version": "2.0",
    "extensions": {
        "serviceBus": {
            "autoCompleteMessages": False,
            "maxConcurrentSessions": 1,
            "sessionIdleTimeout": "00:01:00",  # IDLE_TIMEOUT_SECONDS
            "maxAutoLockRenewalDuration": "00:05:00",
        }
    },
}


@dataclass(frozen=True)
class App:
    host: LocalHost
    servicebus: ServiceBusClient
    products: TableClient
    mail: MailSink

    def send(self, queue: str, session_id: str, messages: list[TaskMessage]) -> None:
        with self.servicebus.get_queue_sender(queue) as sender:
            sender.send_messages([to_service_bus_message(session_id, m) for m in messages])

    def imported(self, sku: str) -> bool:
        rows = self.products.query_entities(
            "PartitionKey eq @pk", parameters={"pk": table_key(sku)}
        )
        return bool(list(rows))

    def receipt(self, job_id: str) -> bool:
        wanted = f"<{job_id}.receipt@pipelines.local>"
        return any(str(m.get("Message-ID")) == wanted for m in self.mail.received())


@pytest.fixture
def app(servicebus_connection_string: str, azurite_connection_string: str) -> Iterator[App]:
    ensure_storage(
        Tables.from_connection_string(azurite_connection_string),
        BlobServiceClient.from_connection_string(azurite_connection_string),
    )
    with (
        run_mail_sink() as mail,
        ServiceBusClient.from_connection_string(servicebus_connection_string) as servicebus,
    ):
        settings = {
            "AzureWebJobsStorage": azurite_connection_string,
            "ServiceBusConnection": servicebus_connection_string,
            "PURCHASE_QUEUE_NAME": APP_PURCHASE_QUEUE,
            "IMPORT_QUEUE_NAME": APP_IMPORT_QUEUE,
            "REPLAY_QUEUE_NAME": "replay-requests",
            "SMTP_HOST": mail.host,
            "SMTP_PORT": str(mail.port),
            "PAYMENT_SIMULATOR_OUTAGE_TOKENS": OUTAGE_CARD,
            "TASK_MAX_ATTEMPTS": str(TASK_MAX_ATTEMPTS),
            "TASK_RETRY_MIN_BACKOFF_SECONDS": "0.1",
            "TASK_RETRY_MAX_BACKOFF_SECONDS": "0.2",
        }
        use_container(None)  # the app builds its clients from these settings
        host = LocalHost(
            function_app.__file__,
            settings,
            ONE_SLOT_HOST_JSON,
            functions=["product_import_tasks", "purchase_tasks"],
            drain_timeout=10,
        )
        host.start()
        try:
            yield App(
                host,
                servicebus,
                TableClient.from_connection_string(azurite_connection_string, PRODUCTS_TABLE),
                mail,
            )
        finally:
            host.stop()
            use_container(None)


def import_session(job: str, skus: list[str]) -> list[TaskMessage]:
    rows = [{"sku": sku, "name": sku, "price": "2.50", "currency": "EUR"} for sku in skus]
    return [
        import_message(job, step, is_last=step == len(rows), row=row)
        for step, row in enumerate(rows, start=1)
    ]


def order(sku: str, card: str = "tok_visa") -> Any:
    return parse_order(
        {
            "customer_email": "ada@example.com",
            "customer_name": "Ada Lovelace",
            "card_token": card,
            "currency": "EUR",
            "lines": [{"sku": sku, "quantity": 2}],
        }
    )


def test_one_session_slot_runs_session_after_session_without_waiting_the_idle_timeout(
    app: App,
) -> None:
    run = uuid.uuid4().hex[:8]
    imports = {f"import-{run}-{n}": [f"APP-{run}-{n}-{row}" for row in (1, 2)] for n in (1, 2, 3)}
    for session_id, skus in imports.items():
        app.send(APP_IMPORT_QUEUE, session_id, import_session(session_id, skus))

    every_sku = [sku for skus in imports.values() for sku in skus]
    wait_for(
        lambda: all(app.imported(sku) for sku in every_sku),
        timeout=WITHIN,
        what="three import sessions through one slot",
    )

    jobs = [f"order-{run}-{n}" for n in (1, 2)]
    for job in jobs:
        app.send(APP_PURCHASE_QUEUE, job, purchase_messages(job, order(every_sku[0])))
    wait_for(
        lambda: all(app.receipt(job) for job in jobs),
        timeout=WITHIN,
        what="two purchase sessions through one slot",
    )


def test_a_transient_failure_fails_the_session_after_the_apps_own_attempts(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    run = uuid.uuid4().hex[:8]
    sku = f"APP-{run}-tea"
    app.send(APP_IMPORT_QUEUE, f"import-{run}", import_session(f"import-{run}", [sku]))
    wait_for(lambda: app.imported(sku), timeout=WITHIN, what="the product imported")
    job = f"order-{run}"
    caplog.set_level(logging.INFO, logger="localdev.host")

    app.send(APP_PURCHASE_QUEUE, job, purchase_messages(job, order(sku, card=OUTAGE_CARD)))

    letters = wait_for(
        lambda: len(found := dead_letters(app, job)) == 3 and found,
        timeout=WITHIN,
        what="the payment and the two tasks after it dead-lettered",
    )
    assert [(m.message_id, m.dead_letter_reason) for m in letters] == [
        (f"{job}:3", "PaymentProviderUnavailable"),
        (f"{job}:4", "SessionFailed"),
        (f"{job}:5", "SessionFailed"),
    ]
    description = str(letters[0].dead_letter_error_description)
    assert description.startswith(f"Gave up after {TASK_MAX_ATTEMPTS} attempts")
    assert "failed at step 3 (ProcessPayment) with PaymentProviderUnavailable" in str(
        letters[1].dead_letter_error_description
    )
    payment_runs = re.findall(rf"MessageId: {re.escape(job)}:3,", caplog.text)
    assert len(payment_runs) == TASK_MAX_ATTEMPTS
    assert not app.receipt(job)


def dead_letters(app: App, job: str) -> list[Any]:
    with app.servicebus.get_queue_receiver(
        APP_PURCHASE_QUEUE, sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=1
    ) as receiver:
        peeked = receiver.peek_messages(max_message_count=100)
    return sorted((m for m in peeked if m.session_id == job), key=lambda m: m.sequence_number or 0)
