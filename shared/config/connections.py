"""The connections the app makes, as the Functions conventions name them: ``<NAME>`` holds a
connection string, or ``<NAME>__fullyQualifiedNamespace`` / ``<NAME>__accountName`` (plus the
optional ``<NAME>__clientId`` of a user-assigned managed identity) select an identity-based
connection."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from .reader import ConfigurationError, SettingsReader

SERVICE_BUS_CONNECTION = "ServiceBusConnection"
STORAGE_CONNECTION = "AzureWebJobsStorage"
EMAIL_CONNECTION = "CommunicationServicesConnection"


@dataclass(frozen=True)
class ServiceBusConnectionSettings:
    connection_string: str | None = None
    fully_qualified_namespace: str | None = None
    client_id: str | None = None


@dataclass(frozen=True)
class StorageConnectionSettings:
    connection_string: str | None = None
    account_name: str | None = None
    table_service_uri: str | None = None
    blob_service_uri: str | None = None
    queue_service_uri: str | None = None
    client_id: str | None = None


@dataclass(frozen=True)
class EmailServiceConnectionSettings:
    """Azure Communication Services: a connection string (``endpoint=…;accesskey=…``, the
    local stand-in's) or the resource's endpoint, reached with the app's identity."""

    connection_string: str | None = None
    endpoint: str | None = None
    client_id: str | None = None


def service_bus_connection(
    name: str = SERVICE_BUS_CONNECTION, environ: Mapping[str, str] | None = None
) -> ServiceBusConnectionSettings:
    """The Service Bus connection ``name``, as a Functions binding reads it: a connection
    string in ``name`` or ``name__fullyQualifiedNamespace`` (identity-based). Raises
    ``ConfigurationError`` naming the settings when neither is set."""
    env = SettingsReader(os.environ if environ is None else environ)
    settings = ServiceBusConnectionSettings(
        connection_string=env.optional(name),
        fully_qualified_namespace=env.optional(f"{name}__fullyQualifiedNamespace"),
        client_id=env.optional(f"{name}__clientId"),
    )
    if not (settings.connection_string or settings.fully_qualified_namespace):
        raise ConfigurationError(
            f"Set {name} (a connection string) or {name}__fullyQualifiedNamespace "
            "(identity-based, e.g. mynamespace.servicebus.windows.net)."
        )
    return settings


def storage_connection(
    name: str = STORAGE_CONNECTION, environ: Mapping[str, str] | None = None
) -> StorageConnectionSettings:
    """The storage connection ``name``: a connection string in ``name`` (UseDevelopmentStorage
    for Azurite) or ``name__accountName`` / ``name__<service>ServiceUri`` (identity-based).
    Raises ``ConfigurationError`` naming the settings when none is set."""
    env = SettingsReader(os.environ if environ is None else environ)
    settings = StorageConnectionSettings(
        connection_string=env.optional(name),
        account_name=env.optional(f"{name}__accountName"),
        table_service_uri=env.optional(f"{name}__tableServiceUri"),
        blob_service_uri=env.optional(f"{name}__blobServiceUri"),
        queue_service_uri=env.optional(f"{name}__queueServiceUri"),
        client_id=env.optional(f"{name}__clientId"),
    )
    if not (settings.connection_string or settings.account_name or settings.table_service_uri):
        raise ConfigurationError(
            f"Set {name} (a connection string, UseDevelopmentStorage=true for Azurite), "
            f"{name}__accountName or {name}__tableServiceUri (identity-based)."
        )
    return settings
