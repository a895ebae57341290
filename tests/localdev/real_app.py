"""The real app (function_app.py) on the local host over the test session's emulator and
Azurite, with one session slot per queue and a sessionIdleTimeout of a minute; and what the
tests send it and read back."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from azure.data.tables import TableClient
from azure.data.tables import TableServiceClient as Tables
from azure.servicebus import ServiceBusClient, ServiceBusSubQueue
from azure.storage.blob import BlobServiceClient

import function_app
from functions_local_host import LocalHost
from localdev.email_http import RunningEmailService, run_email_service
from shared.adapters.azure_clients import PRODUCTS_TABLE, ensure_storage
from shared.adapters.servicebus_sender import to_service_bus_message
from shared.adapters.table_products import TableProductCatalog
from shared.bootstrap import use_container
from shared.bootstrap.declared import APP_TABLES
from shared.domain.envelope import TaskMessage
from shared.domain.orders import parse_order
from shared.domain.pipelines import import_message
from tests.builders import PIPELINES, order_document

from .conftest import APP_IMPORT_QUEUE, APP_PURCHASE_QUEUE

IDLE_TIMEOUT_SECONDS = 60
# A transient failure is tried every second and given up on at the first failure 1.8 s after
# the first: three attempts, whatever each takes up to 0.8 s.
TASK_ATTEMPTS = 3
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
    email: RunningEmailService

    def send(
        self,
        queue: str,
        session_id: str,
        messages: list[TaskMessage],
        properties: Mapping[str, Any] | None = None,
    ) -> None:
        """Send ``messages`` as one session; ``properties``: added to each message's
        application properties."""
        sent = [to_service_bus_message(session_id, m) for m in messages]
        for message in sent:
            message.application_properties = dict(message.application_properties or {})
            message.application_properties.update((properties or {}).items())
        with self.servicebus.get_queue_sender(queue) as sender:
            sender.send_messages(sent)

    def imported(self, sku: str) -> bool:
        return sku in TableProductCatalog(self.products).find([sku])

    def receipt(self, job_id: str) -> bool:
        wanted = f"<{job_id}.receipt@pipelines.local>"
        return any(str(m.get("Message-ID")) == wanted for m in self.email.received())


@contextmanager
def run_app(
    servicebus_connection_string: str,
    azurite_connection_string: str,
    settings: Mapping[str, str] | None = None,
) -> Iterator[App]:
    """function_app.py's two session triggers on a local host; ``settings`` added to the
    app settings."""
    ensure_storage(
        Tables.from_connection_string(azurite_connection_string),
        BlobServiceClient.from_connection_string(azurite_connection_string),
        tables=APP_TABLES,
    )
    with (
        run_email_service() as email,
        ServiceBusClient.from_connection_string(servicebus_connection_string) as servicebus,
    ):
        app_settings = {
            **{p.queue_setting: p.default_queue for p in PIPELINES},  # every pipeline's queue
            "AzureWebJobsStorage": azurite_connection_string,
            "ServiceBusConnection": servicebus_connection_string,
            "PURCHASE_QUEUE_NAME": APP_PURCHASE_QUEUE,
            "IMPORT_QUEUE_NAME": APP_IMPORT_QUEUE,
            "REPLAY_QUEUE_NAME": "replay-requests",
            "CommunicationServicesConnection": email.connection_string,
            "PAYMENT_SIMULATOR_OUTAGE_TOKENS": OUTAGE_CARD,
            "TASK_RETRY_WINDOW_SECONDS": "1.8",
            "TASK_RETRY_MIN_BACKOFF_SECONDS": "1",
            "TASK_RETRY_MAX_BACKOFF_SECONDS": "1",
            **(settings or {}),
        }
        use_container(None)  # the app builds its clients from these settings
        host = LocalHost(
            function_app.__file__,
            app_settings,
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
                email,
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
        order_document(
            customer_name="Ada Lovelace", card_token=card, lines=[{"sku": sku, "quantity": 2}]
        )
    )


def dead_letters(app: App, job: str) -> list[Any]:
    with app.servicebus.get_queue_receiver(
        APP_PURCHASE_QUEUE, sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=1
    ) as receiver:
        peeked = receiver.peek_messages(max_message_count=100)
    return sorted((m for m in peeked if m.session_id == job), key=lambda m: m.sequence_number or 0)
