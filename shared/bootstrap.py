"""The composition root: the one place that builds real adapters and wires the services.

Nothing is built at import time. The first invocation builds what it needs from the
settings; later invocations of the same worker reuse the clients. Tests and the local host
install their own container with ``use_container``.
"""

from __future__ import annotations

import threading
from functools import cached_property
from typing import TYPE_CHECKING

from .config import Settings
from .domain.pipelines import PRODUCT_IMPORT, PURCHASE
from .service_layer.import_tasks import import_tasks
from .service_layer.imports import import_progress_observer
from .service_layer.processor import FailurePolicy, RetryPolicy, SessionProcessor
from .service_layer.purchase_tasks import PurchaseDependencies, purchase_tasks

if TYPE_CHECKING:
    from azure.data.tables import TableServiceClient
    from azure.servicebus import ServiceBusClient
    from azure.storage.blob import BlobServiceClient
    from azure.storage.queue import QueueServiceClient

    from .adapters.servicebus_sender import SenderPool
    from .adapters.table_archive import TableDeadLetterArchive, TableReplayRequests
    from .adapters.table_import_progress import TableImportProgress
    from .service_layer.ports import (
        AuditTrail,
        Confirmations,
        DeadLetterCounter,
        DeadLetterSource,
        ImportManifests,
        MessageResender,
        ReplayQueue,
        SessionSeeder,
        TaskSender,
    )


class Container:
    """Lazily built, thread-safe enough for the Functions worker (built once per process)."""

    def __init__(self, settings: Settings | None = None) -> None:
        self._settings = settings

    @cached_property
    def settings(self) -> Settings:
        return self._settings or Settings.from_env()

    @cached_property
    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(
            max_attempts=self.settings.task_max_attempts,
            min_backoff=self.settings.task_retry_min_backoff_seconds,
            max_backoff=self.settings.task_retry_max_backoff_seconds,
        )

    @cached_property
    def purchase_processor(self) -> SessionProcessor:
        from .adapters.azure_clients import (
            ORDER_NUMBERS_TABLE,
            PAYMENTS_TABLE,
            PRODUCTS_TABLE,
            RECEIPTS_CONTAINER,
        )
        from .adapters.blob_receipts import BlobReceiptStore
        from .adapters.pdf_receipts import ReportLabReceiptRenderer
        from .adapters.simulated_payments import TableSimulatedPaymentGateway
        from .adapters.smtp_email import SmtpEmailSender
        from .adapters.table_order_numbers import TableOrderNumbers
        from .adapters.table_products import TableProductCatalog

        settings = self.settings
        tables = self._table_service
        deps = PurchaseDependencies(
            order_numbers=TableOrderNumbers(tables.get_table_client(ORDER_NUMBERS_TABLE)),
            catalog=TableProductCatalog(tables.get_table_client(PRODUCTS_TABLE)),
            payments=TableSimulatedPaymentGateway(
                tables.get_table_client(PAYMENTS_TABLE),
                decline_tokens=settings.payment_decline_tokens,
                outage_tokens=settings.payment_outage_tokens,
            ),
            receipts=BlobReceiptStore(self._blob_service.get_container_client(RECEIPTS_CONTAINER)),
            renderer=ReportLabReceiptRenderer(),
            email=SmtpEmailSender(
                settings.smtp_host,
                settings.smtp_port,
                sender=settings.receipt_email_from,
                username=settings.smtp_username,
                password=settings.smtp_password,
                starttls=settings.smtp_starttls,
            ),
            tax_rate=settings.tax_rate,
            shipping_fee=settings.shipping_fee,
        )
        return SessionProcessor(
            pipeline=PURCHASE,
            tasks=purchase_tasks(deps),
            policy=FailurePolicy.STOP_ON_FAILURE,
            retry=self.retry_policy,
            journal=self.archive,
        )

    @cached_property
    def import_processor(self) -> SessionProcessor:
        from .adapters.azure_clients import PRODUCTS_TABLE
        from .adapters.table_products import TableProductCatalog

        catalog = TableProductCatalog(self._table_service.get_table_client(PRODUCTS_TABLE))
        return SessionProcessor(
            pipeline=PRODUCT_IMPORT,
            tasks=import_tasks(catalog),
            policy=FailurePolicy.CONTINUE_ON_FAILURE,
            retry=self.retry_policy,
            journal=self.archive,
            observer=import_progress_observer(self.import_progress),
        )

    @cached_property
    def import_progress(self) -> TableImportProgress:
        from .adapters.azure_clients import IMPORT_PROGRESS_TABLE
        from .adapters.table_import_progress import TableImportProgress

        return TableImportProgress(self._table_service.get_table_client(IMPORT_PROGRESS_TABLE))

    @cached_property
    def import_manifests(self) -> ImportManifests:
        from .adapters.table_import_manifests import IMPORT_JOBS_TABLE, TableManifestStore

        return TableManifestStore(self._table_service.get_table_client(IMPORT_JOBS_TABLE))

    @cached_property
    def task_sender(self) -> TaskSender:
        from .adapters.servicebus_sender import ServiceBusTaskSender

        return ServiceBusTaskSender(self._service_bus, self._senders)

    # -- dead letters, archive, replay -----------------------------------------------------------

    @cached_property
    def archive(self) -> TableDeadLetterArchive:
        from .adapters.azure_clients import (
            DEAD_LETTER_BODIES_CONTAINER,
            DEAD_LETTERS_TABLE,
            FAILED_SESSIONS_TABLE,
        )
        from .adapters.table_archive import TableDeadLetterArchive

        return TableDeadLetterArchive(
            self._table_service.get_table_client(DEAD_LETTERS_TABLE),
            self._table_service.get_table_client(FAILED_SESSIONS_TABLE),
            self._blob_service.get_container_client(DEAD_LETTER_BODIES_CONTAINER),
        )

    @cached_property
    def dead_letter_source(self) -> DeadLetterSource:
        from .adapters.servicebus_dead_letters import ServiceBusDeadLetterSource

        return ServiceBusDeadLetterSource(self._service_bus)

    @cached_property
    def audit_trail(self) -> AuditTrail:
        from .adapters.table_audit import AUDIT_TABLE, TableAuditTrail

        return TableAuditTrail(self._table_service.get_table_client(AUDIT_TABLE))

    @cached_property
    def confirmations(self) -> Confirmations:
        from .adapters.table_confirmations import CONFIRMATIONS_TABLE, TableConfirmations

        return TableConfirmations(self._table_service.get_table_client(CONFIRMATIONS_TABLE))

    @cached_property
    def dead_letter_counter(self) -> DeadLetterCounter:
        from .adapters.servicebus_waiting import ServiceBusDeadLetterCounter

        return ServiceBusDeadLetterCounter(self._service_bus)

    @cached_property
    def resender(self) -> MessageResender:
        from .adapters.servicebus_dead_letters import ServiceBusResender

        return ServiceBusResender(self._service_bus, self._senders)

    @cached_property
    def session_seeder(self) -> SessionSeeder:
        from .adapters.servicebus_dead_letters import ServiceBusSessionSeeder

        return ServiceBusSessionSeeder(self._service_bus)

    @cached_property
    def replay_requests(self) -> TableReplayRequests:
        from .adapters.azure_clients import REPLAY_REQUESTS_TABLE
        from .adapters.table_archive import TableReplayRequests

        return TableReplayRequests(self._table_service.get_table_client(REPLAY_REQUESTS_TABLE))

    @cached_property
    def replay_queue(self) -> ReplayQueue:
        from .adapters.storage_replay_queue import StorageQueueReplayQueue, replay_queue_client

        queue = self._queue_service.get_queue_client(self.settings.replay_queue_name)
        return StorageQueueReplayQueue(replay_queue_client(queue))

    @property
    def session_queues(self) -> tuple[str, ...]:
        return (self.settings.purchase_queue_name, self.settings.import_queue_name)

    @cached_property
    def _service_bus(self) -> ServiceBusClient:
        from .adapters.azure_clients import service_bus_client

        return service_bus_client(self.settings.service_bus)

    @cached_property
    def _senders(self) -> SenderPool:
        from .adapters.servicebus_sender import SenderPool

        return SenderPool(self._service_bus)

    @cached_property
    def _queue_service(self) -> QueueServiceClient:
        from .adapters.azure_clients import queue_service

        return queue_service(self.settings.storage)

    @cached_property
    def _table_service(self) -> TableServiceClient:
        from .adapters.azure_clients import table_service

        return table_service(self.settings.storage)

    @cached_property
    def _blob_service(self) -> BlobServiceClient:
        from .adapters.azure_clients import blob_service

        return blob_service(self.settings.storage)


_container: Container | None = None
_lock = threading.Lock()


def container() -> Container:
    global _container
    with _lock:
        if _container is None:
            _container = Container()
        return _container


def use_container(new: Container | None) -> None:
    """Install a container (tests, the local host); ``None`` goes back to the default."""
    global _container
    with _lock:
        _container = new
