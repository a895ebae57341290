"""Clients for Storage, Service Bus and Communication Services Email, built from the
connection settings.

A connection string wins when set (``UseDevelopmentStorage=true`` means Azurite on its
default ports); otherwise the connection is identity-based, with ``DefaultAzureCredential``
(the user-assigned managed identity when a client id is set). The names of the tables and
containers the app uses live here, in one place.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit

from azure.core.credentials import TokenCredential
from azure.core.exceptions import ResourceExistsError
from azure.core.utils import parse_connection_string
from azure.data.tables import TableServiceClient
from azure.servicebus import ServiceBusClient
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueServiceClient

from ..config import (
    STORAGE_CONNECTION,
    ConfigurationError,
    ServiceBusConnectionSettings,
    StorageConnectionSettings,
)
from ..domain.pipelines.product_import import (
    IMPORT_JOBS_TABLE,
    IMPORT_PROGRESS_TABLE,
    PRODUCTS_TABLE,
)
from ..domain.pipelines.purchase import (
    ORDER_NUMBERS_TABLE,
    ORDER_PROGRESS_TABLE,
    PAYMENTS_TABLE,
    RECEIPT_EMAILS_TABLE,
)
from .storage_requests import StorageRequestCounter
from .storage_services import BlobService, TableService
from .table_audit import AUDIT_TABLE
from .table_confirmations import CONFIRMATIONS_TABLE
from .table_pipeline_pauses import PIPELINE_PAUSES_TABLE
from .table_session_outcomes import SESSION_OUTCOMES_TABLE
from .table_timer_runs import TIMER_RUNS_TABLE
from .table_transactions import TableTransactions

# The pipelines' own tables are named by their declarations (shared.domain.pipelines);
# these names are kept here too for the adapters that open them.
__all__ = [
    "IMPORT_JOBS_TABLE",
    "IMPORT_PROGRESS_TABLE",
    "ORDER_NUMBERS_TABLE",
    "ORDER_PROGRESS_TABLE",
    "PAYMENTS_TABLE",
    "PRODUCTS_TABLE",
    "RECEIPT_EMAILS_TABLE",
]

RECEIPTS_CONTAINER = "receipts"

DEAD_LETTERS_TABLE = "deadletters"
FAILED_SESSIONS_TABLE = "failedsessions"
REPLAY_REQUESTS_TABLE = "replayrequests"
IDEMPOTENCY_TABLE = "idempotencykeys"
DEAD_LETTER_BODIES_CONTAINER = "deadletter-bodies"

# The tables of the app itself, whatever pipelines it runs; with each declared pipeline's
# own ``tables``, the app's tables (``shared.bootstrap.declared.APP_TABLES``).
CORE_TABLES = (
    DEAD_LETTERS_TABLE,
    FAILED_SESSIONS_TABLE,
    REPLAY_REQUESTS_TABLE,
    IDEMPOTENCY_TABLE,
    AUDIT_TABLE,
    CONFIRMATIONS_TABLE,
    SESSION_OUTCOMES_TABLE,
    PIPELINE_PAUSES_TABLE,
    TIMER_RUNS_TABLE,
)
APP_CONTAINERS = (RECEIPTS_CONTAINER, DEAD_LETTER_BODIES_CONTAINER)

# The well-known development account of Azurite (public, documented, not a secret).
AZURITE_ACCOUNT_NAME = "devstoreaccount1"
AZURITE_ACCOUNT_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


def azurite_connection_string(
    *,
    host: str = "127.0.0.1",
    blob_port: int = 10000,
    queue_port: int = 10001,
    table_port: int = 10002,
) -> str:
    """The full connection string of an Azurite instance (what ``UseDevelopmentStorage=true``
    stands for when the ports are the defaults)."""
    base = f"http://{host}"
    return (
        f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT_NAME};"
        f"AccountKey={AZURITE_ACCOUNT_KEY};"
        f"BlobEndpoint={base}:{blob_port}/{AZURITE_ACCOUNT_NAME};"
        f"QueueEndpoint={base}:{queue_port}/{AZURITE_ACCOUNT_NAME};"
        f"TableEndpoint={base}:{table_port}/{AZURITE_ACCOUNT_NAME}"
    )


def table_service(settings: StorageConnectionSettings) -> TableServiceClient:
    return _storage_client(TableService, "table", settings.table_service_uri, settings)


def table_transactions(
    settings: StorageConnectionSettings, tables: TableServiceClient
) -> TableTransactions | None:
    """What sends the app's entity-group transactions of upserts (``table_transactions``),
    on the account ``tables`` (``table_service``) reaches, authorized as it is: with the
    connection string's account key, or with the app's identity. None for a connection string
    without an account key (a SAS): the SDK sends them then."""
    counter = StorageRequestCounter("table")
    counter.base_path = urlsplit(tables.url).path.rstrip("/")
    connection_string = _storage_connection_string(settings)
    if not connection_string:
        return TableTransactions.with_credential(
            tables.url, identity_credential(settings.client_id), on_request=counter
        )
    parts = parse_connection_string(connection_string)  # keys lowercased
    if not parts.get("accountkey"):
        return None
    return TableTransactions.with_shared_key(
        tables.url, parts["accountname"], parts["accountkey"], on_request=counter
    )


def blob_service(settings: StorageConnectionSettings) -> BlobServiceClient:
    return _storage_client(BlobService, "blob", settings.blob_service_uri, settings)


def queue_service(settings: StorageConnectionSettings) -> QueueServiceClient:
    return _storage_client(QueueServiceClient, "queue", settings.queue_service_uri, settings)


StorageClient = TypeVar("StorageClient", TableService, BlobService, QueueServiceClient)


def _storage_client(
    kind: type[StorageClient],
    service: str,
    explicit_uri: str | None,
    settings: StorageConnectionSettings,
) -> StorageClient:
    """A connection string's client, or the service's address with the app's identity."""
    counter = StorageRequestCounter(service)
    connection_string = _storage_connection_string(settings)
    options: dict[str, Any] = {"raw_request_hook": counter}
    if connection_string:
        # the SDKs build ``cls``: a subclass (storage_services) gets itself back
        client = cast(StorageClient, kind.from_connection_string(connection_string, **options))
    else:
        options["credential"] = identity_credential(settings.client_id)
        client = kind(_service_uri(settings, service, explicit_uri), **options)
    if isinstance(client, TableService | BlobService):
        client.connection_string = connection_string
        client.client_options = {"raw_request_hook": counter}
    counter.base_path = urlsplit(client.url).path.rstrip("/")
    return client


def service_bus_client(settings: ServiceBusConnectionSettings, **options: Any) -> ServiceBusClient:
    """A client for a connection string (also the local emulator's) or, without one, for the
    namespace with the app's identity. ``options`` go to the SDK client as they are (e.g. its
    retry policy: ``retry_total``, ``retry_backoff_factor``, ``retry_backoff_max``)."""
    if settings.connection_string:
        return ServiceBusClient.from_connection_string(settings.connection_string, **options)
    if not settings.fully_qualified_namespace:
        raise ConfigurationError(
            "The Service Bus connection has neither a connection string nor a "
            "fullyQualifiedNamespace."
        )
    return ServiceBusClient(
        fully_qualified_namespace=settings.fully_qualified_namespace,
        credential=identity_credential(settings.client_id),
        **options,
    )


def ensure_storage(
    table_service: TableServiceClient,
    blob_service: BlobServiceClient,
    queue_service: QueueServiceClient | None = None,
    *,
    tables: Iterable[str],
    containers: Iterable[str] = APP_CONTAINERS,
    queues: Iterable[str] = (),
) -> None:
    """Create the tables, containers and queues that do not exist yet. Safe to call again and
    from several workers at once: what already exists is left as it is."""
    for table in tables:
        table_service.create_table_if_not_exists(table)
    for container in containers:
        with contextlib.suppress(ResourceExistsError):
            blob_service.create_container(container)
    queue_names = list(queues)
    if not queue_names:
        return
    if queue_service is None:
        raise ValueError(f"queues {queue_names} were asked for but no queue service was given")
    for queue in queue_names:
        with contextlib.suppress(ResourceExistsError):
            queue_service.create_queue(queue)


def _storage_connection_string(settings: StorageConnectionSettings) -> str | None:
    value = (settings.connection_string or "").strip()
    if not value:
        return None
    # Only the table SDK knows the shorthand, and only without a trailing ';': expand it once
    # here so every client reads the same account.
    if value.rstrip(";").replace(" ", "").lower() == "usedevelopmentstorage=true":
        return azurite_connection_string()
    return value


def _service_uri(settings: StorageConnectionSettings, service: str, explicit: str | None) -> str:
    if explicit:
        return explicit
    if settings.account_name:
        return f"https://{settings.account_name}.{service}.core.windows.net"
    raise ConfigurationError(
        f"Set {STORAGE_CONNECTION}__{service}ServiceUri or {STORAGE_CONNECTION}__accountName: "
        f"the {service} service has no address."
    )


def identity_credential(client_id: str | None) -> TokenCredential:
    """The app's identity: DefaultAzureCredential, the user-assigned managed identity when
    ``client_id`` names one."""
    # Imported here: azure.identity is slow to import and only identity-based setups need it.
    from azure.identity import DefaultAzureCredential

    return DefaultAzureCredential(managed_identity_client_id=client_id)
