"""What the job takes from the app's adapters, named in one place: the Service Bus and Table
clients, built from the app's settings as the app builds them (a connection string, or the
namespace / account with a credential); a task message as the app's sender makes it; and the
table of import job manifests that the app's status route reads. The rest of the job imports
these from here, never from ``shared.adapters`` (a contract in pyproject.toml)."""

from shared.adapters.azure_clients import service_bus_client, table_service
from shared.adapters.servicebus_sender import to_service_bus_message
from shared.adapters.table_import_manifests import IMPORT_JOBS_TABLE, TableManifestStore

__all__ = [
    "IMPORT_JOBS_TABLE",
    "TableManifestStore",
    "service_bus_client",
    "table_service",
    "to_service_bus_message",
]
