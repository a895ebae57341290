from __future__ import annotations

import uuid

import pytest
from azure.core.credentials import AzureNamedKeyCredential
from azure.identity import DefaultAzureCredential

from shared.adapters.azure_clients import (
    blob_service,
    queue_service,
    service_bus_client,
    table_service,
)
from shared.config import (
    ConfigurationError,
    ServiceBusConnectionSettings,
    StorageConnectionSettings,
)

pytestmark = pytest.mark.integration


def test_clients_from_the_connection_string_reach_azurite(
    storage_settings: StorageConnectionSettings,
) -> None:
    name = f"q{uuid.uuid4().hex}"
    queues = queue_service(storage_settings)

    queues.create_queue(name)
    queues.get_queue_client(name).send_message("hello")

    [message] = queues.get_queue_client(name).receive_messages()
    assert message.content == "hello"
    queues.delete_queue(name)


@pytest.mark.parametrize("shorthand", ["UseDevelopmentStorage=true", "UseDevelopmentStorage=true;"])
def test_the_development_shorthand_means_azurite_on_its_default_ports(shorthand: str) -> None:
    settings = StorageConnectionSettings(connection_string=shorthand)

    assert table_service(settings).url.startswith("http://127.0.0.1:10002/devstoreaccount1")
    assert blob_service(settings).url.startswith("http://127.0.0.1:10000/devstoreaccount1")
    assert queue_service(settings).url.startswith("http://127.0.0.1:10001/devstoreaccount1")
    credential = table_service(settings).credential
    assert isinstance(credential, AzureNamedKeyCredential)
    assert credential.named_key.name == "devstoreaccount1"


def test_without_a_connection_string_the_app_identity_is_used() -> None:
    settings = StorageConnectionSettings(account_name="shopdata", client_id="0000-client")

    tables = table_service(settings)
    blobs = blob_service(settings)

    assert tables.url.startswith("https://shopdata.table.core.windows.net")
    assert blobs.url.startswith("https://shopdata.blob.core.windows.net")
    assert queue_service(settings).url.startswith("https://shopdata.queue.core.windows.net")
    assert isinstance(blobs.credential, DefaultAzureCredential)


def test_explicit_service_uris_win_over_the_account_name() -> None:
    settings = StorageConnectionSettings(
        table_service_uri="https://tables.example.net", blob_service_uri=None
    )

    assert table_service(settings).url.startswith("https://tables.example.net")
    with pytest.raises(ConfigurationError, match="AzureWebJobsStorage__blobServiceUri"):
        blob_service(settings)


def test_service_bus_by_namespace_uses_the_app_identity() -> None:
    client = service_bus_client(
        ServiceBusConnectionSettings(fully_qualified_namespace="shop.servicebus.windows.net")
    )

    assert client.fully_qualified_namespace == "shop.servicebus.windows.net"
    client.close()
