"""The job's --connection-setting / --storage-setting resolve as the function app's connections:
a connection string, or an identity-based client for the namespace / account. No Azure call:
building a client and a DefaultAzureCredential does not connect."""

from __future__ import annotations

import pickle

import pytest
from azure.identity import DefaultAzureCredential

from shared.adapters.azure_clients import service_bus_client, table_service
from shared.config import ConfigurationError
from shared.config import service_bus_connection as service_bus_settings
from shared.config import storage_connection as storage_settings
from spark_jobs.product_import.sending import SendOptions, send_partition

EMULATOR = (
    "Endpoint=sb://localhost;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true"
)


def test_a_connection_string_setting_builds_a_connection_string_client() -> None:
    settings = service_bus_settings("ServiceBusConnection", {"ServiceBusConnection": EMULATOR})

    with service_bus_client(settings) as client:
        assert settings.connection_string == EMULATOR
        assert client.fully_qualified_namespace == "localhost"
        assert not isinstance(client._credential, DefaultAzureCredential)


def test_a_namespace_setting_builds_an_identity_client_for_that_namespace() -> None:
    settings = service_bus_settings(
        "Bus",
        {
            "Bus__fullyQualifiedNamespace": " sb-shop.servicebus.windows.net ",
            "Bus__clientId": "00000000-0000-0000-0000-000000000001",
            "ServiceBusConnection": EMULATOR,  # another connection's setting: not read
        },
    )

    with service_bus_client(settings) as client:
        assert settings.connection_string is None
        assert settings.client_id == "00000000-0000-0000-0000-000000000001"
        assert client.fully_qualified_namespace == "sb-shop.servicebus.windows.net"
        assert isinstance(client._credential, DefaultAzureCredential)


def test_a_storage_connection_string_setting_builds_a_connection_string_client() -> None:
    settings = storage_settings(
        "AzureWebJobsStorage", {"AzureWebJobsStorage": "UseDevelopmentStorage=true;"}
    )

    service = table_service(settings)

    assert service.url.startswith("http://127.0.0.1:10002/devstoreaccount1")
    assert not isinstance(service.credential, DefaultAzureCredential)


@pytest.mark.parametrize(
    ("environ", "url"),
    [
        ({"AzureWebJobsStorage__accountName": "stshop"}, "https://stshop.table.core.windows.net"),
        (
            {"AzureWebJobsStorage__tableServiceUri": "https://stshop.table.core.windows.net/"},
            "https://stshop.table.core.windows.net",
        ),
    ],
)
def test_an_account_setting_builds_an_identity_table_client_for_that_account(
    environ: dict[str, str], url: str
) -> None:
    service = table_service(storage_settings("AzureWebJobsStorage", environ))

    assert service.url.rstrip("/") == url
    assert isinstance(service.credential, DefaultAzureCredential)


def test_a_missing_connection_fails_naming_its_settings() -> None:
    with pytest.raises(ConfigurationError, match="Bus__fullyQualifiedNamespace"):
        service_bus_settings("Bus", {"ServiceBusConnection": EMULATOR})
    with pytest.raises(ConfigurationError, match="Store__accountName"):
        storage_settings("Store", {"Store__accountName": "  "})


def test_the_executor_builds_its_client_from_the_settings_the_function_carries(monkeypatch) -> None:
    """foreachPartition pickles the function for the executors: it carries the settings (plain
    data), and the client and its credential are built on the executor."""
    from pyspark import cloudpickle

    from spark_jobs.product_import import sending

    class Built(Exception):
        """Raised by the fake with what it was given (the pickled copy has its own state)."""

    def client_for(settings: object, **options: object) -> object:
        raise Built(settings)

    monkeypatch.setattr(sending, "service_bus_client", client_for)
    settings = service_bus_settings(
        "ServiceBusConnection",
        {"ServiceBusConnection__fullyQualifiedNamespace": "sb-shop.servicebus.windows.net"},
    )
    send = send_partition(
        job_id="j", queue_name="q", connection=settings, options=SendOptions(), sent=None
    )

    shipped = pickle.loads(cloudpickle.dumps(send))

    assert shipped(iter(())) is None  # an empty partition builds no client
    with pytest.raises(Built) as built:
        shipped(iter([{"session_id": "j-0000"}]))
    assert built.value.args == (settings,)
