"""The move of products from the catalog's earlier layout (one partition per SKU) never goes
back in time, on a real Azurite: a product imported under its new keys since the deploy keeps
its price, a move interrupted and run again does not bring the old price back, and a write of
an instance of the earlier release while the move runs is kept, not deleted unread."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from azure.data.tables import TableClient, UpdateMode

from shared.adapters.table_keys import table_key
from shared.adapters.table_products import TableProductCatalog
from shared.domain.products import Product

pytestmark = pytest.mark.integration


def old_release_writes(table: TableClient, sku: str, price: str) -> None:
    """The product as the release before the partitioned layout wrote it."""
    table.upsert_entity(
        {
            "PartitionKey": table_key(sku),
            "RowKey": "product",
            "Sku": sku,
            "Name": f"Tea at {price}",
            "Price": price,
            "Currency": "EUR",
            "Description": "",
        },
        mode=UpdateMode.REPLACE,
    )


def imported(sku: str, price: str) -> Product:
    return Product(sku, f"Tea at {price}", Decimal(price), "EUR")


def price(catalog: TableProductCatalog, sku: str) -> Decimal:
    return catalog.find([sku])[sku].price


def old_entities(table: TableClient) -> list[str]:
    return [e["Sku"] for e in table.query_entities("RowKey eq 'product'")]


def test_a_product_imported_after_the_deploy_keeps_its_new_price(table: TableClient) -> None:
    # Given: a product of the earlier layout at 3.10, imported again at 4.20 after the deploy
    catalog = TableProductCatalog(table)
    old_release_writes(table, "TEA-1", "3.10")
    catalog.upsert_many([imported("TEA-1", "4.20")])

    # When: the move runs
    move = catalog.move_legacy_products()

    # Then: the import's price is kept, and the old entity is gone
    assert price(catalog, "TEA-1") == Decimal("4.20")
    assert catalog.find(["TEA-1"])["TEA-1"].name == "Tea at 4.20"
    assert (move.moved, move.newer, move.skipped) == ((), ("TEA-1",), ())
    assert old_entities(table) == []


class DeletesFail:
    """The move's table, the process dying at its first delete (after its first copy)."""

    def __init__(self, table: TableClient) -> None:
        self._table = table

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)

    def delete_entity(self, *args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt("the move's process ends here")


def test_a_move_run_again_after_an_interruption_keeps_an_import_made_in_between(
    table: TableClient,
) -> None:
    # Given: a move interrupted after it copied the product at 3.10, before the delete
    old_release_writes(table, "TEA-2", "3.10")
    with pytest.raises(KeyboardInterrupt):
        TableProductCatalog(DeletesFail(table)).move_legacy_products()  # type: ignore[arg-type]
    catalog = TableProductCatalog(table)
    assert price(catalog, "TEA-2") == Decimal("3.10")
    # ... and an import at 4.20 since
    catalog.upsert_many([imported("TEA-2", "4.20")])

    # When: the move runs again
    move = catalog.move_legacy_products()

    # Then: the import's price stays
    assert price(catalog, "TEA-2") == Decimal("4.20")
    assert move.newer == ("TEA-2",)
    assert old_entities(table) == []


class OldInstanceWritesWhileMoving:
    """The move's table, an instance of the earlier release writing the product's old entity
    once the move has read the old entities and before it copies them."""

    def __init__(self, table: TableClient, sku: str, new_price: str) -> None:
        self._table = table
        self._write = (sku, new_price)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)

    def query_entities(self, *args: Any, **kwargs: Any) -> list[Any]:
        read = list(self._table.query_entities(*args, **kwargs))
        old_release_writes(self._table, *self._write)
        return read


def test_an_old_instance_writing_while_the_move_runs_keeps_its_write(table: TableClient) -> None:
    # Given: a product of the earlier layout at 3.10
    old_release_writes(table, "TEA-3", "3.10")

    # When: the move runs, and an instance of the earlier release imports it at 5.00 while
    # it does
    racing = OldInstanceWritesWhileMoving(table, "TEA-3", "5.00")
    first = TableProductCatalog(racing).move_legacy_products()  # type: ignore[arg-type]

    # Then: the old entity's new write is not deleted: the move skips it and says so ...
    assert old_entities(table) == ["TEA-3"]
    assert first.skipped == ("TEA-3",)
    # ... and the next run moves it: the newest write wins
    second = TableProductCatalog(table).move_legacy_products()
    assert second.moved == ("TEA-3",)
    assert price(TableProductCatalog(table), "TEA-3") == Decimal("5.00")
    assert old_entities(table) == []


def test_products_absent_from_the_new_layout_are_moved_once(table: TableClient) -> None:
    for n in range(3):
        old_release_writes(table, f"TEA-{n}", f"1.0{n}")
    catalog = TableProductCatalog(table)

    first, second = catalog.move_legacy_products(), catalog.move_legacy_products()

    assert sorted(first.moved) == ["TEA-0", "TEA-1", "TEA-2"]
    assert (second.moved, second.newer, second.skipped) == ((), (), ())
    assert [price(catalog, f"TEA-{n}") for n in range(3)] == [
        Decimal("1.00"),
        Decimal("1.01"),
        Decimal("1.02"),
    ]
