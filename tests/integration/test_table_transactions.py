"""The app's own entity-group transactions of upserts (``TableTransactions``) on a real
Azurite: what they write is what the SDK's ``submit_transaction`` writes for the same entities,
in both modes; one request each, counted as the SDK's are; a failed operation fails the whole
transaction with the service's status; the product catalog writes through it as it does
through the SDK."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError
from azure.data.tables import TableClient, TableServiceClient, UpdateMode

from shared.adapters import azure_clients
from shared.adapters.storage_requests import StorageRequestCounter
from shared.adapters.table_products import PARTITIONS, TableProductCatalog, partition_of
from shared.adapters.table_transactions import TableTransactions
from shared.config import StorageConnectionSettings
from shared.domain.products import Product

pytestmark = pytest.mark.integration

ENTITIES: list[dict[str, Any]] = [
    {
        "PartitionKey": "o'brien ä",
        "RowKey": "row 1 (é)",
        "text": "Mug \u2014 blue",
        "count": 5,
        "negative": -(2**31),
        "ratio": 1.5,
        "whole": 2.0,
        "flag": True,
        "at": datetime(2026, 11, 26, 12, 30, 5, 123456, tzinfo=UTC),
        "raw": b"\x00\x01\xff",
        "guid": uuid.UUID("c9da6455-213d-42c9-9a79-3e9149a57833"),
        "empty": "",
        "missing": None,
    },
    {"PartitionKey": "o'brien ä", "RowKey": "row 2", "text": "second"},
]


@pytest.fixture
def transactions(
    storage_settings: StorageConnectionSettings, table_service_client: TableServiceClient
) -> TableTransactions:
    sender = azure_clients.table_transactions(storage_settings, table_service_client)
    assert sender is not None  # Azurite's connection string has an account key
    return sender


@pytest.fixture
def twin(table_service_client: TableServiceClient) -> Iterator[TableClient]:
    """A second table, written by the SDK, to compare with."""
    twin = table_service_client.create_table(f"twin{uuid.uuid4().hex[:12]}")
    yield twin
    table_service_client.delete_table(twin.table_name)


def stored(table: TableClient) -> list[dict[str, Any]]:
    return sorted((dict(e) for e in table.list_entities()), key=lambda e: e["RowKey"])


@pytest.mark.parametrize("mode", [UpdateMode.REPLACE, UpdateMode.MERGE])
def test_an_upsert_writes_what_the_sdk_writes_for_the_same_entities(
    table: TableClient, twin: TableClient, transactions: TableTransactions, mode: UpdateMode
) -> None:
    earlier = {"PartitionKey": "o'brien ä", "RowKey": "row 2", "kept": "only if merged"}
    for target in (table, twin):
        target.upsert_entity(earlier)

    transactions.upsert(table.table_name, ENTITIES, mode)
    twin.submit_transaction([("upsert", entity, {"mode": mode}) for entity in ENTITIES])

    ours, theirs = stored(table), stored(twin)
    assert ours == theirs
    assert ("kept" in ours[1]) is (mode is UpdateMode.MERGE)
    assert ours[0]["at"] == ENTITIES[0]["at"] and ours[0]["raw"] == b"\x00\x01\xff"


def test_a_transaction_is_one_request_counted_as_the_sdks_are(
    transactions: TableTransactions, table: TableClient
) -> None:
    seen: list[tuple[str, str]] = []
    counter = StorageRequestCounter("table")

    def count(request: Any) -> None:
        seen.append(counter.describe(request.http_request))

    endpoint = transactions.endpoint
    counter.base_path = "/" + endpoint.rsplit("/", 1)[-1]
    account, key = "devstoreaccount1", azure_clients.AZURITE_ACCOUNT_KEY
    sender = TableTransactions.with_shared_key(endpoint, account, key, on_request=count)

    sender.upsert(table.table_name, ENTITIES, UpdateMode.REPLACE)

    assert seen == [(table.table_name, "transaction")]


def test_a_failed_operation_fails_the_whole_transaction_with_its_status(
    table: TableClient, transactions: TableTransactions
) -> None:
    too_large = {"PartitionKey": "p", "RowKey": "big", "text": "x" * 40_000}  # over 64 KiB

    with pytest.raises(HttpResponseError) as raised:
        transactions.upsert(
            table.table_name,
            [{"PartitionKey": "p", "RowKey": "fine"}, too_large],
            UpdateMode.REPLACE,
        )

    assert raised.value.status_code == 400
    assert "PropertyValueTooLarge" in str(raised.value)
    assert stored(table) == []  # nothing of the transaction was written


def test_a_transaction_on_a_missing_table_is_a_404(transactions: TableTransactions) -> None:
    with pytest.raises(HttpResponseError) as raised:
        transactions.upsert(
            "nosuchtable", [{"PartitionKey": "p", "RowKey": "r"}], UpdateMode.REPLACE
        )

    assert raised.value.status_code == 404


def test_a_wrong_account_key_is_refused(
    transactions: TableTransactions, table: TableClient
) -> None:
    wrong = TableTransactions.with_shared_key(
        transactions.endpoint, "devstoreaccount1", "d3Jvbmcga2V5"
    )

    with pytest.raises(HttpResponseError) as raised:
        wrong.upsert(table.table_name, ENTITIES[1:], UpdateMode.REPLACE)

    assert raised.value.status_code == 403


def test_the_catalog_writes_a_batch_through_it_one_transaction_per_partition(
    table: TableClient, transactions: TableTransactions
) -> None:
    sent: list[str] = []
    counted = TableTransactions.with_shared_key(
        transactions.endpoint,
        "devstoreaccount1",
        azure_clients.AZURITE_ACCOUNT_KEY,
        on_request=lambda request: sent.append(request.http_request.url),
    )
    batch = [Product(f"SKU-{n}", f"Product {n}", Decimal("1.00"), "EUR") for n in range(80)]

    TableProductCatalog(table, counted).upsert_many(
        [*batch, Product("SKU-7", "P", Decimal("2.5"), "EUR")]
    )

    assert len({partition_of(p.sku) for p in batch}) == PARTITIONS
    assert len(sent) == PARTITIONS and all(url.endswith("/$batch") for url in sent)
    found = TableProductCatalog(table).find([p.sku for p in batch])
    assert len(found) == 80 and found["SKU-7"].price == Decimal("2.5")


def test_a_connection_string_without_an_account_key_leaves_transactions_to_the_sdk() -> None:
    sas = StorageConnectionSettings(
        connection_string="TableEndpoint=https://acct.table.core.windows.net/;"
        "SharedAccessSignature=sv=2019-02-02&sig=abc"
    )

    tables = azure_clients.table_service(sas)
    assert azure_clients.table_transactions(sas, tables) is None


def test_a_connection_string_is_read_whatever_the_case_of_its_keys(
    azurite_connection_string: str, table: TableClient
) -> None:
    lowered = ";".join(
        f"{key.lower()}={value}"
        for key, value in (part.split("=", 1) for part in azurite_connection_string.split(";"))
    )
    settings = StorageConnectionSettings(connection_string=lowered)
    sender = azure_clients.table_transactions(settings, azure_clients.table_service(settings))
    assert sender is not None

    sender.upsert(table.table_name, ENTITIES[1:], UpdateMode.REPLACE)

    assert [e["RowKey"] for e in stored(table)] == ["row 2"]
