"""Which table, container or queue a Storage request is for, and what kind of request it is:
the labels of the ``storage.requests`` metric (docs/capacity.md), on Azurite's addresses (the
account in the path) and Azure's (the account in the host)."""

from __future__ import annotations

import pytest
from azure.core.rest import HttpRequest

from shared.adapters.storage_requests import StorageRequestCounter

AZURITE = "http://127.0.0.1:10002/devstoreaccount1"
AZURE = "https://acct.table.core.windows.net"


def counter(service: str, base: str) -> StorageRequestCounter:
    found = StorageRequestCounter(service)
    found.base_path = "/devstoreaccount1" if "devstoreaccount1" in base else ""
    return found


@pytest.mark.parametrize("base", [AZURITE, AZURE])
@pytest.mark.parametrize(
    ("method", "path", "headers", "expected"),
    [
        ("GET", "/products(PartitionKey='a',RowKey='b')", {}, ("products", "point read")),
        ("GET", "/products()?$filter=x", {}, ("products", "query")),
        ("POST", "/products", {}, ("products", "insert")),
        ("PUT", "/products(PartitionKey='a',RowKey='b')", {}, ("products", "upsert")),
        ("PUT", "/t(PartitionKey='a',RowKey='b')", {"If-Match": "*"}, ("t", "replace")),
        ("PATCH", "/t(PartitionKey='a',RowKey='b')", {}, ("t", "merge")),
        ("DELETE", "/t(PartitionKey='a',RowKey='b')", {}, ("t", "delete")),
        ("POST", "/Tables", {}, ("Tables", "table POST")),
    ],
)
def test_table_requests_are_named_by_table_and_kind(
    base: str, method: str, path: str, headers: dict[str, str], expected: tuple[str, str]
) -> None:
    request = HttpRequest(method, base + path, headers=headers)
    assert counter("table", base).describe(request) == expected


def test_a_transaction_is_named_by_the_table_of_its_first_sub_request() -> None:
    body = (
        b"--batch\r\nContent-Type: multipart/mixed; boundary=changeset\r\n\r\n--changeset\r\n"
        b"PUT " + AZURITE.encode() + b"/ordernumbers(PartitionKey='p',RowKey='r') HTTP/1.1\r\n"
    )
    request = HttpRequest("POST", AZURITE + "/$batch", content=body)
    assert counter("table", AZURITE).describe(request) == ("ordernumbers", "transaction")


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("PUT", "/receipts/ORD-1.pdf", ("receipts", "upload")),
        ("GET", "/receipts/ORD-1.pdf", ("receipts", "download")),
        ("PUT", "/receipts?restype=container", ("receipts", "container PUT")),
    ],
)
def test_blob_requests_are_named_by_container_and_kind(
    method: str, path: str, expected: tuple[str, str]
) -> None:
    base = "http://127.0.0.1:10000/devstoreaccount1"
    request = HttpRequest(method, base + path)
    assert counter("blob", base).describe(request) == expected
