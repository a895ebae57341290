"""Real local services for the integration tests: one Azurite and one SMTP server per test
session, and a fresh, uniquely named table or container per test."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from azure.data.tables import TableClient, TableServiceClient
from azure.storage.blob import BlobServiceClient, ContainerClient

from localdev.azurite import AzuriteError, free_port, run_azurite
from shared.adapters.azure_clients import blob_service, table_service
from shared.config import StorageConnectionSettings


@pytest.fixture(scope="session")
def azurite_connection_string() -> Iterator[str]:
    """The connection string of a real Azurite started for this test session."""
    with ExitStack() as stack:
        failure: str | None = None
        try:
            azurite = stack.enter_context(run_azurite())
        except AzuriteError as error:
            failure = str(error)
        if failure is not None:
            pytest.fail(failure, pytrace=False)
        yield azurite.connection_string


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


@pytest.fixture
def container(blob_service_client: BlobServiceClient) -> Iterator[ContainerClient]:
    """A new, empty blob container of its own for one test, deleted afterwards."""
    client = blob_service_client.create_container(f"c{uuid.uuid4().hex}")
    yield client
    client.delete_container()


@dataclass
class SmtpInbox:
    """What a real local SMTP server received, parsed with the ``email`` package."""

    host: str
    port: int
    messages: list[EmailMessage] = field(default_factory=list)
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
            self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        return "250 Message accepted for delivery"

    def clear(self) -> None:
        with self._lock:
            self.messages.clear()
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
