"""The job's connection settings, read the way the function app reads its own.

``--connection-setting NAME`` / ``--storage-setting NAME`` name a connection as a Functions
binding does: ``NAME`` holds a connection string (the local emulator, Azurite, tests), or
``NAME__fullyQualifiedNamespace`` (Service Bus) / ``NAME__accountName`` or
``NAME__tableServiceUri`` (storage) select an identity-based connection, with the optional
``NAME__clientId`` of a user-assigned managed identity. Identity-based clients use
``DefaultAzureCredential``; on Databricks it finds the job's service principal in
``AZURE_CLIENT_ID`` / ``AZURE_TENANT_ID`` / ``AZURE_CLIENT_SECRET``.

Only the names differ from shared/config.py (which reads the app's two fixed names): the
result is the app's settings objects, and the clients are built by the app's
``shared.adapters.azure_clients``. The settings are plain frozen data, so they can travel to
the executors; each executor builds its own client and credential from them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from shared.config import (
    ConfigurationError,
    ServiceBusConnectionSettings,
    StorageConnectionSettings,
)


def service_bus_settings(
    name: str, environ: Mapping[str, str] | None = None
) -> ServiceBusConnectionSettings:
    """The Service Bus connection ``name``; raises ``ConfigurationError`` naming the settings
    when neither form is set."""
    env = os.environ if environ is None else environ
    settings = ServiceBusConnectionSettings(
        connection_string=_optional(env, name),
        fully_qualified_namespace=_optional(env, f"{name}__fullyQualifiedNamespace"),
        client_id=_optional(env, f"{name}__clientId"),
    )
    if not (settings.connection_string or settings.fully_qualified_namespace):
        raise ConfigurationError(
            f"Set {name} (a connection string) or {name}__fullyQualifiedNamespace "
            "(identity-based, e.g. mynamespace.servicebus.windows.net)."
        )
    return settings


def storage_settings(
    name: str, environ: Mapping[str, str] | None = None
) -> StorageConnectionSettings:
    """The storage connection ``name`` (tables only: the job saves its manifest); raises
    ``ConfigurationError`` naming the settings when none is set."""
    env = os.environ if environ is None else environ
    settings = StorageConnectionSettings(
        connection_string=_optional(env, name),
        account_name=_optional(env, f"{name}__accountName"),
        table_service_uri=_optional(env, f"{name}__tableServiceUri"),
        client_id=_optional(env, f"{name}__clientId"),
    )
    if not (settings.connection_string or settings.account_name or settings.table_service_uri):
        raise ConfigurationError(
            f"Set {name} (a connection string, UseDevelopmentStorage=true for Azurite), "
            f"{name}__accountName or {name}__tableServiceUri (identity-based)."
        )
    return settings


def _optional(environ: Mapping[str, str], name: str) -> str | None:
    value = environ.get(name, "").strip()
    return value or None
