from __future__ import annotations

import pytest
from azure.storage.blob import BlobServiceClient, ContainerClient

from shared.adapters.azure_clients import (
    APP_CONTAINERS,
    RECEIPTS_CONTAINER,
    ensure_storage,
)
from shared.adapters.blob_receipts import BlobReceiptStore, ReceiptNotFound
from shared.bootstrap.declared import APP_TABLES

from .conftest import Counted

pytestmark = pytest.mark.integration

PDF = b"%PDF-1.4\n\x00\xff binary \r\n content\n%%EOF\n"


def test_a_receipt_is_stored_as_a_pdf_blob_and_loaded_byte_exact(
    container: ContainerClient,
) -> None:
    store = BlobReceiptStore(container)

    location = store.save("ORD-00000001", PDF)

    assert location == f"{container.container_name}/ORD-00000001.pdf"
    blob = container.get_blob_client("ORD-00000001.pdf")
    assert blob.get_blob_properties().content_settings.content_type == "application/pdf"
    assert blob.download_blob().readall() == PDF
    assert store.load("ORD-00000001") == PDF


def test_saving_again_overwrites(container: ContainerClient) -> None:
    store = BlobReceiptStore(container)
    store.save("ORD-00000001", PDF)

    store.save("ORD-00000001", b"%PDF-1.4 second")

    assert store.load("ORD-00000001") == b"%PDF-1.4 second"
    assert [blob.name for blob in container.list_blobs()] == ["ORD-00000001.pdf"]


def test_a_receipt_just_saved_is_loaded_without_a_download_and_others_are_downloaded(
    container: ContainerClient, counted: Counted
) -> None:
    requests = counted.requests
    store = BlobReceiptStore(counted.container, kept=2)
    for n in (1, 2, 3):
        store.save(f"ORD-{n:08d}", PDF + bytes([n]))
    requests.clear()

    assert store.load("ORD-00000003") == PDF + b"\x03"
    assert store.load("ORD-00000002") == PDF + b"\x02"
    assert requests == []  # the two kept
    assert store.load("ORD-00000001") == PDF + b"\x01"  # saved before them: downloaded
    # ... as is one another instance saved
    BlobReceiptStore(container).save("ORD-00000004", PDF)
    assert store.load("ORD-00000004") == PDF
    assert requests == ["GET", "GET"]


def test_loading_a_missing_receipt_says_so(container: ContainerClient) -> None:
    with pytest.raises(ReceiptNotFound, match="ORD-404"):
        BlobReceiptStore(container).load("ORD-404")


def test_ensure_storage_creates_the_app_resources_and_can_run_again(
    table_service_client, blob_service_client: BlobServiceClient
) -> None:
    ensure_storage(table_service_client, blob_service_client, tables=APP_TABLES)
    ensure_storage(table_service_client, blob_service_client, tables=APP_TABLES)

    tables = {table.name for table in table_service_client.list_tables()}
    containers = {container.name for container in blob_service_client.list_containers()}
    assert set(APP_TABLES) <= tables
    assert set(APP_CONTAINERS) <= containers
    receipts = BlobReceiptStore(blob_service_client.get_container_client(RECEIPTS_CONTAINER))
    assert receipts.save("ORD-00000002", PDF) == "receipts/ORD-00000002.pdf"
    assert receipts.load("ORD-00000002") == PDF
