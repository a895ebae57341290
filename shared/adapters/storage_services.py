"""Table and Blob service clients whose table and container clients are each built on their
own, through the SDKs' public constructors.

The SDKs' ``TableServiceClient.get_table_client`` and ``BlobServiceClient.get_container_client``
build the new client's pipeline from the service client's own policy objects, and building a
pipeline re-links those objects to it. A table client made while another client of the same
service sends a request can break that request mid-way (``AttributeError:
'_SansIOHTTPPolicyRunner' object has no attribute 'next'``,
tests/integration/test_storage_services.py reproduces it): the app makes some clients when a
part is first used (a route's first call, the purge's first run) while orders are in flight.
Here each table or container client is made as the app's service client was (the same
connection string, or the same address and credential, and the same request hook) with
pipeline and policies of its own; its connection pool is its own too."""

from __future__ import annotations

from typing import Any

from azure.data.tables import TableClient, TableServiceClient
from azure.storage.blob import BlobServiceClient, ContainerClient, ContainerProperties


class TableService(TableServiceClient):
    # Set by ``azure_clients``: how the service client was made.
    connection_string: str | None = None
    client_options: dict[str, Any] = {}  # noqa: RUF012 - replaced per instance, never mutated

    def get_table_client(self, table_name: str, **kwargs: Any) -> TableClient:
        options = {**self.client_options, **kwargs}
        if self.connection_string:
            return TableClient.from_connection_string(self.connection_string, table_name, **options)
        return TableClient(self.url, table_name, credential=self.credential, **options)


class BlobService(BlobServiceClient):
    connection_string: str | None = None
    client_options: dict[str, Any] = {}  # noqa: RUF012 - replaced per instance, never mutated

    def get_container_client(self, container: ContainerProperties | str) -> ContainerClient:
        name = container.name if isinstance(container, ContainerProperties) else container
        if self.connection_string:
            return ContainerClient.from_connection_string(
                self.connection_string, name, **self.client_options
            )
        return ContainerClient(self.url, name, credential=self.credential, **self.client_options)
