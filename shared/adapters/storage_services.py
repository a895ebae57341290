"""Table and Blob service clients whose table and container clients each get a pipeline of
their own.

The SDKs' ``TableServiceClient.get_table_client`` and ``BlobServiceClient.get_container_client``
build the new client's pipeline from the service client's policy objects, and building a
pipeline re-links those objects (each ``HTTPPolicy.next``) to it. A table client made while
another client of the same service sends a request can break that request mid-way
(``AttributeError: '_SansIOHTTPPolicyRunner' object has no attribute 'next'``): the app makes
some clients when a part is first used (a route's first call, the purge's first run), while
orders are in flight. These subclasses make the same clients with the same arguments as the
SDKs do (azure-data-tables 12, azure-storage-blob 12), each over copies of the policies that
are re-linked, so no pipeline in use is touched; the transport (its connection pool) and the
stateless policies are still shared."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from azure.core.pipeline import Pipeline
from azure.core.pipeline.policies import HTTPPolicy
from azure.data.tables import TableClient, TableServiceClient
from azure.data.tables._base_client import TransportWrapper as TablesTransport
from azure.storage.blob import BlobServiceClient, ContainerClient, ContainerProperties
from azure.storage.blob._shared.base_client import TransportWrapper as BlobTransport


def _own(policies: Iterable[Any]) -> list[Any]:
    """The policies, the ones a pipeline re-links (``HTTPPolicy``) copied."""
    return [copy.copy(p) if isinstance(p, HTTPPolicy) else p for p in policies]


class TableService(TableServiceClient):
    def get_table_client(self, table_name: str, **kwargs: Any) -> TableClient:
        transport = self._client._client._pipeline._transport
        pipeline = Pipeline(transport=TablesTransport(transport), policies=_own(self._policies))
        return TableClient(
            self.url,
            table_name=table_name,
            credential=self.credential,
            api_version=self.api_version,
            pipeline=pipeline,
            location_mode=self._location_mode,
            _hosts=self._hosts,
            **kwargs,
        )


class BlobService(BlobServiceClient):
    def get_container_client(self, container: ContainerProperties | str) -> ContainerClient:
        name = container.name if isinstance(container, ContainerProperties) else container
        pipeline = Pipeline(
            transport=BlobTransport(self._pipeline._transport),
            policies=_own(self._pipeline._impl_policies),
        )
        return ContainerClient(
            self.url,
            container_name=name,
            credential=self.credential,
            api_version=self.api_version,
            _configuration=self._config,
            _pipeline=pipeline,
            _location_mode=self._location_mode,
            _hosts=self._hosts,
            require_encryption=self.require_encryption,
            encryption_version=self.encryption_version,
            key_encryption_key=self.key_encryption_key,
            key_resolver_function=self.key_resolver_function,
        )
