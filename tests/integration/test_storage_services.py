"""Table and container clients made while other clients of the same service send requests
(a part first used while orders are in flight) leave those requests alone."""

from __future__ import annotations

import threading
import uuid

import pytest
from azure.data.tables import TableClient, TableServiceClient
from azure.storage.blob import BlobServiceClient, ContainerClient

from shared.adapters.azure_clients import blob_service, table_service
from shared.adapters.storage_services import BlobService, TableService
from shared.config import StorageConnectionSettings

pytestmark = pytest.mark.integration


def _requests_while_clients_are_made(send: object, make: object, seconds: float = 3.0) -> list:
    errors: list[BaseException] = []
    stop = threading.Event()

    def sending() -> None:
        while not stop.is_set():
            try:
                send()  # type: ignore[operator]
            except BaseException as error:
                errors.append(error)
                return

    threads = [threading.Thread(target=sending) for _ in range(4)]
    for thread in threads:
        thread.start()
    deadline = threading.Timer(seconds, stop.set)
    deadline.start()
    while not stop.is_set():
        make()  # type: ignore[operator]
    for thread in threads:
        thread.join()
    return errors


def test_table_clients_made_during_requests_leave_them_alone(
    table_service_client: TableServiceClient, table: TableClient
) -> None:
    assert isinstance(table_service_client, TableService)

    errors = _requests_while_clients_are_made(
        lambda: table.upsert_entity({"PartitionKey": "p", "RowKey": "r"}),
        lambda: table_service_client.get_table_client("other"),
    )

    assert errors == []


def test_container_clients_made_during_requests_leave_them_alone(
    blob_service_client: BlobServiceClient, container: ContainerClient
) -> None:
    assert isinstance(blob_service_client, BlobService)

    errors = _requests_while_clients_are_made(
        lambda: container.upload_blob("b", b"x", overwrite=True),
        lambda: blob_service_client.get_container_client("other"),
    )

    assert errors == []


def test_a_table_and_a_container_client_reach_what_the_service_client_reaches(
    azurite_connection_string: str,
) -> None:
    settings = StorageConnectionSettings(azurite_connection_string)
    tables, blobs = table_service(settings), blob_service(settings)
    name = f"t{uuid.uuid4().hex[:12]}"
    tables.create_table(name)
    tables.get_table_client(name).upsert_entity({"PartitionKey": "p", "RowKey": "r", "n": 1})
    assert [e["n"] for e in tables.get_table_client(name).list_entities()] == [1]
    container = blobs.create_container(f"c{uuid.uuid4().hex[:12]}")
    blobs.get_container_client(container.container_name).upload_blob("b", b"x")
    assert container.download_blob("b").readall() == b"x"
    assert issubclass(TableService, TableServiceClient)
    assert issubclass(BlobService, BlobServiceClient)
