from __future__ import annotations

from decimal import Decimal

import pytest
from azure.data.tables import TableClient

from shared.adapters.table_products import TableProductCatalog
from shared.domain.products import Product

pytestmark = pytest.mark.integration


def test_upserted_products_are_found_with_exact_prices(table: TableClient) -> None:
    catalog = TableProductCatalog(table)
    mug = Product("MUG-1", "Mug", Decimal("19.99"), "EUR", "A blue mug")
    pen = Product("PEN-2", "Pen", Decimal("0.10"), "EUR")
    catalog.upsert(mug)
    catalog.upsert(pen)

    found = TableProductCatalog(table).find(["MUG-1", "PEN-2", "NOPE-9"])

    assert found == {"MUG-1": mug, "PEN-2": pen}
    assert str(found["PEN-2"].price) == "0.10"  # the scale survives, not just the value


def test_upsert_replaces_the_product(table: TableClient) -> None:
    catalog = TableProductCatalog(table)
    catalog.upsert(Product("MUG-1", "Mug", Decimal("19.99"), "EUR", "A blue mug"))

    catalog.upsert(Product("MUG-1", "Big mug", Decimal("24.50"), "EUR"))

    assert catalog.find(["MUG-1"]) == {
        "MUG-1": Product("MUG-1", "Big mug", Decimal("24.50"), "EUR")
    }
    assert len(list(table.list_entities())) == 1


def test_find_of_unknown_or_repeated_skus(table: TableClient) -> None:
    catalog = TableProductCatalog(table)
    catalog.upsert(Product("MUG-1", "Mug", Decimal("19.99"), "EUR"))

    assert catalog.find([]) == {}
    assert catalog.find(["GHOST"]) == {}
    assert list(catalog.find(["MUG-1", "MUG-1"])) == ["MUG-1"]
