"""The product catalog's table layout on a real Azurite: products in a few partitions by their
SKU, a batch written in one transaction per partition, the earlier layout (one partition per
SKU) still read and then moved."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from azure.data.tables import TableClient, TableServiceClient

from shared.adapters.table_keys import table_key
from shared.adapters.table_products import PARTITIONS, TableProductCatalog, partition_of
from shared.domain.products import Product

pytestmark = pytest.mark.integration


def product(sku: str, price: str = "1.00") -> Product:
    return Product(sku, f"Product {sku}", Decimal(price), "EUR")


def test_a_batch_is_written_in_one_transaction_per_partition(
    table: TableClient, azurite_connection_string: str
) -> None:
    sent: list[str] = []

    def count(request: Any) -> None:
        sent.append(f"{request.http_request.method} {request.http_request.url.split('?')[0]}")

    counted = TableServiceClient.from_connection_string(
        azurite_connection_string, raw_request_hook=count
    ).get_table_client(table.table_name)
    batch = [product(f"SKU-{n}") for n in range(80)] + [product("SKU-7", "2.50")]

    TableProductCatalog(counted).upsert_many(batch)

    assert len({partition_of(p.sku) for p in batch}) == PARTITIONS
    assert len(sent) == PARTITIONS
    assert all(request.endswith("/$batch") for request in sent)
    found = TableProductCatalog(table).find([p.sku for p in batch])
    assert len(found) == 80
    assert found["SKU-7"].price == Decimal("2.50")  # the last row of a SKU wins


def test_products_of_the_earlier_layout_are_found_and_moved(table: TableClient) -> None:
    catalog = TableProductCatalog(table)
    table.upsert_entity(
        {
            "PartitionKey": table_key("OLD.1"),
            "RowKey": "product",
            "Sku": "OLD.1",
            "Name": "Kept from before",
            "Price": "3.10",
            "Currency": "EUR",
            "Description": "",
        }
    )
    catalog.upsert(product("NEW-1"))

    assert set(catalog.find(["OLD.1", "NEW-1", "NONE"])) == {"OLD.1", "NEW-1"}
    assert catalog.move_legacy_products().moved == ("OLD.1",)
    assert catalog.move_legacy_products().moved == ()
    rows = {(e["PartitionKey"], e["RowKey"]) for e in table.list_entities()}
    assert rows == {
        (partition_of("OLD.1"), table_key("OLD.1")),
        (partition_of("NEW-1"), table_key("NEW-1")),
    }
    assert catalog.find(["OLD.1"])["OLD.1"].price == Decimal("3.10")
