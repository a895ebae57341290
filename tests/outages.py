"""Real SDK clients pointed at a port nothing listens on, with the SDK's own retries off: a
backing service out of reach, as the app's adapters meet it, in milliseconds."""

from __future__ import annotations

import socket

from azure.data.tables import TableServiceClient
from azure.servicebus import ServiceBusClient
from azure.storage.blob import BlobServiceClient

from shared.adapters.azure_clients import azurite_connection_string


def closed_port() -> int:
    """A port that was free a moment ago (bound, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def unreachable_tables() -> TableServiceClient:
    port = closed_port()
    connection = azurite_connection_string(table_port=port, blob_port=port, queue_port=port)
    return TableServiceClient.from_connection_string(connection, retry_total=0)


def unreachable_blobs() -> BlobServiceClient:
    port = closed_port()
    connection = azurite_connection_string(table_port=port, blob_port=port, queue_port=port)
    return BlobServiceClient.from_connection_string(connection, retry_total=0)


def unreachable_service_bus() -> ServiceBusClient:
    return ServiceBusClient.from_connection_string(
        f"Endpoint=sb://127.0.0.1:{closed_port()};SharedAccessKeyName=k;SharedAccessKey=v;"
        "UseDevelopmentEmulator=true;",
        retry_total=0,
    )
