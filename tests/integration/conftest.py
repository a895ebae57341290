"""Real local services for the integration tests: one Azurite, one SMTP server and one
Service Bus emulator per test session, and a fresh, uniquely named table, container or queue
per test."""

from __future__ import annotations

import copy
import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from azure.data.tables import TableClient, TableServiceClient
from azure.servicebus import ServiceBusClient
from azure.storage.blob import BlobServiceClient, ContainerClient

from localdev.azurite import free_port
from localdev.email_http import RunningEmailService, run_email_service
from shared.adapters.azure_clients import blob_service, table_service
from shared.adapters.smtp_email import SmtpEmailSender
from shared.config import StorageConnectionSettings


@pytest.fixture(scope="session")
def storage_settings(azurite_connection_string: str) -> StorageConnectionSettings:
    return StorageConnectionSettings(connection_string=azurite_connection_string)


@pytest.fixture(scope="session")
def table_service_client(storage_settings: StorageConnectionSettings) -> TableServiceClient:
    return table_service(storage_settings)


@pytest.fixture(scope="session")
def blob_service_client(storage_settings: StorageConnectionSettings) -> BlobServiceClient:
    return blob_service(storage_settings)


@pytest.fixture
def table(table_service_client: TableServiceClient) -> Iterator[TableClient]:
    """A new, empty table of its own for one test, deleted afterwards."""
    name = f"t{uuid.uuid4().hex}"
    client = table_service_client.create_table(name)
    yield client
    table_service_client.delete_table(name)


@dataclass
class Counted:
    """A second client of ``table`` or ``container`` that notes each request's method."""

    table: TableClient
    container: ContainerClient
    requests: list[str]


@pytest.fixture
def counted(
    table: TableClient, container: ContainerClient, azurite_connection_string: str
) -> Counted:
    requests: list[str] = []

    def hook(response: Any) -> None:
        requests.append(response.http_request.method)

    return Counted(
        TableClient.from_connection_string(
            azurite_connection_string, table.table_name, raw_request_hook=hook
        ),
        ContainerClient.from_connection_string(
            azurite_connection_string, container.container_name, raw_request_hook=hook
        ),
        requests,
    )


@pytest.fixture
def container(blob_service_client: BlobServiceClient) -> Iterator[ContainerClient]:
    """A new, empty blob container of its own for one test, deleted afterwards."""
    client = blob_service_client.create_container(f"c{uuid.uuid4().hex}")
    yield client
    client.delete_container()


SHOP_SENDER = "receipts@shop.example"


@dataclass
class SmtpInbox:
    """What a real local SMTP server received, parsed with the ``email`` package."""

    host: str
    port: int
    messages: list[EmailMessage] = field(default_factory=list)
    raw: list[bytes] = field(default_factory=list)  # each message as it came over the wire
    envelopes: list[tuple[str, list[str]]] = field(default_factory=list)
    # Recipients the server answers RCPT TO for with this reply instead of 250, e.g.
    # {"gone@example.com": "550 5.1.1 No such user"}: how a real server refuses.
    rcpt_replies: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, rcpt_options: Any
    ) -> str:
        reply = self.rcpt_replies.get(address)
        if reply is not None:
            return reply
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = message_from_bytes(envelope.original_content, policy=policy.default)
        assert isinstance(message, EmailMessage)
        with self._lock:
            self.messages.append(message)
            self.raw.append(envelope.original_content)
            self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        return "250 Message accepted for delivery"

    def sender(self, **options: Any) -> SmtpEmailSender:
        """The app's SMTP adapter, sending to this server from receipts@shop.example."""
        return SmtpEmailSender(self.host, self.port, sender=SHOP_SENDER, **options)

    def clear(self) -> None:
        with self._lock:
            self.messages.clear()
            self.raw.clear()
            self.envelopes.clear()
            self.rcpt_replies.clear()


@pytest.fixture(scope="session")
def smtp_server() -> Iterator[SmtpInbox]:
    """A real SMTP server (aiosmtpd) on a free local port for the whole session."""
    host = "127.0.0.1"
    inbox = SmtpInbox(host=host, port=free_port(host))
    controller = Controller(inbox, hostname=host, port=inbox.port)
    controller.start()
    try:
        yield inbox
    finally:
        controller.stop()


@pytest.fixture
def smtp_inbox(smtp_server: SmtpInbox) -> SmtpInbox:
    """The session's SMTP server, emptied for this test."""
    smtp_server.clear()
    return smtp_server


@pytest.fixture(scope="session")
def email_service() -> Iterator[RunningEmailService]:
    """The local stand-in for Azure Communication Services Email for the whole session
    (localdev/email_service.py): what the app's default e-mail adapter sends to."""
    with run_email_service() as running:
        yield running


# -- Service Bus ------------------------------------------------------------------------------

APP_EMULATOR_CONFIG = Path(__file__).resolve().parents[2] / "infra" / "local" / "config.json"
# Tests that read a whole queue (its dead-letter sub-queue, its counts) each take a queue of
# their own from this pool: copies of the app's purchase-tasks queue under other names.
QUEUE_POOL_SIZE = 40
# Shorter than the app's one minute, so a test of an expired lock waits seconds, not a minute.
POOL_LOCK_DURATION = "PT5S"
POOL_LOCK_SECONDS = 5


def pool_queue(number: int) -> str:
    return f"it-sessions-{number:02d}"


def emulator_config() -> dict[str, Any]:
    """The app's own emulator config (infra/local/config.json), plus the test queue pool."""
    config: dict[str, Any] = json.loads(APP_EMULATOR_CONFIG.read_text(encoding="utf-8"))
    namespace = config["UserConfig"]["Namespaces"][0]
    [template] = [q for q in namespace["Queues"] if q["Name"] == "purchase-tasks"]
    for number in range(1, QUEUE_POOL_SIZE + 1):
        queue = copy.deepcopy(template)
        queue["Name"] = pool_queue(number)
        queue["Properties"]["LockDuration"] = POOL_LOCK_DURATION
        namespace["Queues"].append(queue)
    return config


@dataclass
class ServiceBusEmulator:
    """The session's emulator (``servicebus_emulator.testing.run_emulator``)."""

    emulator: Any
    connection_string: str
    _pool: Iterator[str]

    def counts(self, queue: str) -> dict[str, int]:
        """{"active", "scheduled", "deferred", "dead_lettered", "sessions"} of one queue."""
        counts: dict[str, int] = self.emulator.counts()[queue]
        return counts

    def fresh_queue(self) -> str:
        name = next(self._pool, None)
        if name is None:
            pytest.fail(
                f"All {QUEUE_POOL_SIZE} test queues are taken; raise QUEUE_POOL_SIZE in "
                "tests/integration/conftest.py",
                pytrace=False,
            )
        return name


@pytest.fixture(scope="session")
def servicebus_emulator() -> Iterator[ServiceBusEmulator]:
    """The project's Service Bus emulator, started once for the test session with the app's
    queues and the test queue pool."""
    from servicebus_emulator.testing import run_emulator

    with run_emulator(emulator_config()) as emulator:
        pool = iter([pool_queue(n) for n in range(1, QUEUE_POOL_SIZE + 1)])
        yield ServiceBusEmulator(emulator, emulator.connection_string, pool)


@pytest.fixture(scope="session")
def servicebus_connection_string(servicebus_emulator: ServiceBusEmulator) -> str:
    return servicebus_emulator.connection_string


@pytest.fixture(scope="session")
def servicebus_client(servicebus_connection_string: str) -> Iterator[ServiceBusClient]:
    with ServiceBusClient.from_connection_string(servicebus_connection_string) as client:
        yield client


@pytest.fixture
def session_queue(servicebus_emulator: ServiceBusEmulator) -> str:
    """A session-enabled queue with duplicate detection (the app's purchase-tasks settings)
    that no other test uses: its counts and dead letters are this test's alone."""
    return servicebus_emulator.fresh_queue()


@pytest.fixture(scope="session")
def settlement_server() -> Iterator[Any]:
    """The local host's Settlement gRPC service, which ``ServiceBusMessageActions`` call."""
    from functions_local_host.settlement import SettlementRegistry, SettlementServer

    server = SettlementServer(SettlementRegistry())
    server.start()
    yield server
    server.stop()


@pytest.fixture
def session_runner(servicebus_client: ServiceBusClient, settlement_server: Any) -> Any:
    from .servicebus import SessionRunner

    return SessionRunner(servicebus_client, settlement_server)
