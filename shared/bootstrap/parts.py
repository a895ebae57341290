"""The real adapters, each built from the clients it needs, for the container
(``shared.bootstrap``). Every function imports its adapter on first use: the SDKs (and
ReportLab) are slow to import, and not every function of the app needs every one."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from azure.data.tables import TableServiceClient
    from azure.servicebus import ServiceBusClient
    from azure.storage.blob import BlobServiceClient
    from azure.storage.queue import QueueServiceClient

    from ..adapters.acs_email import AcsEmailSender
    from ..adapters.blob_receipts import BlobReceiptStore
    from ..adapters.pdf_receipts import ReportLabReceiptRenderer
    from ..adapters.servicebus_dead_letters import (
        ServiceBusDeadLetterSource,
        ServiceBusResender,
        ServiceBusSessionSeeder,
    )
    from ..adapters.servicebus_sender import SenderPool, ServiceBusTaskSender
    from ..adapters.simulated_payments import TableSimulatedPaymentGateway
    from ..adapters.smtp_email import SmtpEmailSender
    from ..adapters.storage_replay_queue import StorageQueueReplayQueue
    from ..adapters.table_archive import TableDeadLetterArchive
    from ..adapters.table_idempotency import TableIdempotencyRecords
    from ..adapters.table_import_manifests import TableManifestStore
    from ..adapters.table_import_progress import TableImportProgress
    from ..adapters.table_order_numbers import TableBlockOrderNumbers, TableOrderNumbers
    from ..adapters.table_order_progress import TableOrderProgress
    from ..adapters.table_products import TableProductCatalog
    from ..adapters.table_receipt_emails import TableReceiptEmails
    from ..adapters.table_replay_requests import TableReplayRequests
    from ..adapters.table_session_outcomes import TableSessionOutcomes
    from ..adapters.table_transactions import TableTransactions
    from ..config import ServiceBusConnectionSettings, Settings, StorageConnectionSettings


# -- clients -------------------------------------------------------------------------------------


def service_bus_client(settings: ServiceBusConnectionSettings) -> ServiceBusClient:
    from ..adapters import azure_clients

    return azure_clients.service_bus_client(settings)


def table_service(settings: StorageConnectionSettings) -> TableServiceClient:
    from ..adapters import azure_clients

    return azure_clients.table_service(settings)


def table_transactions(
    settings: StorageConnectionSettings, tables: TableServiceClient
) -> TableTransactions | None:
    from ..adapters import azure_clients

    return azure_clients.table_transactions(settings, tables)


def blob_service(settings: StorageConnectionSettings) -> BlobServiceClient:
    from ..adapters import azure_clients

    return azure_clients.blob_service(settings)


def queue_service(settings: StorageConnectionSettings) -> QueueServiceClient:
    from ..adapters import azure_clients

    return azure_clients.queue_service(settings)


def sender_pool(client: ServiceBusClient) -> SenderPool:
    from ..adapters.servicebus_sender import SenderPool

    return SenderPool(client)


# -- the purchase tasks' adapters ----------------------------------------------------------------


def catalog(
    tables: TableServiceClient, transactions: TableTransactions | None
) -> TableProductCatalog:
    from ..adapters.azure_clients import PRODUCTS_TABLE
    from ..adapters.table_products import TableProductCatalog

    return TableProductCatalog(tables.get_table_client(PRODUCTS_TABLE), transactions)


def order_numbers(
    tables: TableServiceClient, settings: Settings
) -> TableOrderNumbers | TableBlockOrderNumbers:
    from ..adapters.azure_clients import ORDER_NUMBERS_TABLE
    from ..adapters.table_order_numbers import TableBlockOrderNumbers, TableOrderNumbers

    table = tables.get_table_client(ORDER_NUMBERS_TABLE)
    if settings.order_number_block_size:
        return TableBlockOrderNumbers(table, block_size=settings.order_number_block_size)
    return TableOrderNumbers(table)


def payments(tables: TableServiceClient, settings: Settings) -> TableSimulatedPaymentGateway:
    from ..adapters.azure_clients import PAYMENTS_TABLE
    from ..adapters.simulated_payments import TableSimulatedPaymentGateway

    return TableSimulatedPaymentGateway(
        tables.get_table_client(PAYMENTS_TABLE),
        decline_tokens=settings.payment_decline_tokens,
        outage_tokens=settings.payment_outage_tokens,
    )


def receipts(blobs: BlobServiceClient) -> BlobReceiptStore:
    from ..adapters.azure_clients import RECEIPTS_CONTAINER
    from ..adapters.blob_receipts import BlobReceiptStore

    return BlobReceiptStore(blobs.get_container_client(RECEIPTS_CONTAINER))


def receipt_renderer() -> ReportLabReceiptRenderer:
    from ..adapters.pdf_receipts import ReportLabReceiptRenderer

    return ReportLabReceiptRenderer()


def email(settings: Settings) -> AcsEmailSender | SmtpEmailSender:
    """The sender EMAIL_SENDER names: Azure Communication Services Email (the default), or
    SMTP."""
    if settings.email_sender == "acs":
        from ..adapters.acs_email import AcsEmailSender, email_client

        connection = settings.email_service
        return AcsEmailSender(
            email_client(connection),
            sender=settings.receipt_email_from,
            endpoint=connection.endpoint or "the endpoint of CommunicationServicesConnection",
        )
    from ..adapters.smtp_email import SmtpEmailSender

    return SmtpEmailSender(
        settings.smtp_host,
        settings.smtp_port,
        sender=settings.receipt_email_from,
        username=settings.smtp_username,
        password=settings.smtp_password,
        starttls=settings.smtp_starttls,
    )


def receipt_emails(tables: TableServiceClient) -> TableReceiptEmails:
    from ..adapters.table_receipt_emails import RECEIPT_EMAILS_TABLE, TableReceiptEmails

    return TableReceiptEmails(tables.get_table_client(RECEIPT_EMAILS_TABLE))


# -- orders, imports, idempotency ----------------------------------------------------------------


def task_sender(client: ServiceBusClient, senders: SenderPool) -> ServiceBusTaskSender:
    from ..adapters.servicebus_sender import ServiceBusTaskSender

    return ServiceBusTaskSender(client, senders)


def order_progress(tables: TableServiceClient) -> TableOrderProgress:
    from ..adapters.azure_clients import ORDER_PROGRESS_TABLE
    from ..adapters.table_order_progress import TableOrderProgress

    return TableOrderProgress(tables.get_table_client(ORDER_PROGRESS_TABLE))


def idempotency_records(tables: TableServiceClient) -> TableIdempotencyRecords:
    from ..adapters.azure_clients import IDEMPOTENCY_TABLE
    from ..adapters.table_idempotency import TableIdempotencyRecords

    return TableIdempotencyRecords(tables.get_table_client(IDEMPOTENCY_TABLE))


def import_progress(tables: TableServiceClient) -> TableImportProgress:
    from ..adapters.azure_clients import IMPORT_PROGRESS_TABLE
    from ..adapters.table_import_progress import TableImportProgress

    return TableImportProgress(tables.get_table_client(IMPORT_PROGRESS_TABLE))


def session_outcomes(tables: TableServiceClient) -> TableSessionOutcomes:
    from ..adapters.table_session_outcomes import SESSION_OUTCOMES_TABLE, TableSessionOutcomes

    return TableSessionOutcomes(tables.get_table_client(SESSION_OUTCOMES_TABLE))


def import_manifests(tables: TableServiceClient) -> TableManifestStore:
    from ..adapters.table_import_manifests import IMPORT_JOBS_TABLE, TableManifestStore

    return TableManifestStore(tables.get_table_client(IMPORT_JOBS_TABLE))


# -- dead letters, archive, replay ---------------------------------------------------------------


def archive(
    tables: TableServiceClient, blobs: BlobServiceClient, transactions: TableTransactions | None
) -> TableDeadLetterArchive:
    from ..adapters.azure_clients import (
        DEAD_LETTER_BODIES_CONTAINER,
        DEAD_LETTERS_TABLE,
        FAILED_SESSIONS_TABLE,
    )
    from ..adapters.table_archive import TableDeadLetterArchive

    return TableDeadLetterArchive(
        tables.get_table_client(DEAD_LETTERS_TABLE),
        tables.get_table_client(FAILED_SESSIONS_TABLE),
        blobs.get_container_client(DEAD_LETTER_BODIES_CONTAINER),
        transactions,
    )


def dead_letter_source(client: ServiceBusClient, settings: Settings) -> ServiceBusDeadLetterSource:
    from ..adapters.servicebus_dead_letters import ServiceBusDeadLetterSource

    return ServiceBusDeadLetterSource(client, receive_wait=settings.archive_receive_wait_seconds)


def resender(client: ServiceBusClient, senders: SenderPool) -> ServiceBusResender:
    from ..adapters.servicebus_dead_letters import ServiceBusResender

    return ServiceBusResender(client, senders)


def session_seeder(client: ServiceBusClient) -> ServiceBusSessionSeeder:
    from ..adapters.servicebus_dead_letters import ServiceBusSessionSeeder

    return ServiceBusSessionSeeder(client)


def replay_requests(tables: TableServiceClient) -> TableReplayRequests:
    from ..adapters.azure_clients import REPLAY_REQUESTS_TABLE
    from ..adapters.table_replay_requests import TableReplayRequests

    return TableReplayRequests(tables.get_table_client(REPLAY_REQUESTS_TABLE))


def replay_queue(queues: QueueServiceClient, name: str) -> StorageQueueReplayQueue:
    from ..adapters.storage_replay_queue import StorageQueueReplayQueue, replay_queue_client

    return StorageQueueReplayQueue(replay_queue_client(queues.get_queue_client(name)))
