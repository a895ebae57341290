"""The product catalog in Azure Tables: one entity per SKU."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableClient, UpdateMode

from ..domain.products import Product
from .azure_errors import TABLE_STORAGE, translated
from .table_keys import table_key

_ROW = "product"


class TableProductCatalog:
    """Each product is its own partition (PartitionKey = SKU), so imports of many rows do not
    contend and a lookup is a point read. Prices are stored as text: a table double would
    turn 19.99 into 19.989999..., and money must stay exact."""

    def __init__(self, table: TableClient) -> None:
        self._table = table

    @translated(TABLE_STORAGE)
    def find(self, skus: Sequence[str]) -> dict[str, Product]:
        """The products that exist among ``skus``; unknown SKUs are left out."""
        found: dict[str, Product] = {}
        for sku in dict.fromkeys(skus):
            try:
                entity = self._table.get_entity(table_key(sku), _ROW)
            except ResourceNotFoundError:
                continue
            found[sku] = Product(
                sku=str(entity["Sku"]),
                name=str(entity["Name"]),
                price=Decimal(str(entity["Price"])),
                currency=str(entity["Currency"]),
                description=str(entity.get("Description") or ""),
            )
        return found

    @translated(TABLE_STORAGE)
    def upsert(self, product: Product) -> None:
        """Create or replace the product: importing the same row twice leaves one product."""
        self._table.upsert_entity(_entity(product), mode=UpdateMode.REPLACE)

    @translated(TABLE_STORAGE)
    def upsert_many(self, products: Sequence[Product]) -> None:
        """One upsert per distinct SKU, the last product of a SKU kept: every product is a
        partition of its own, and a transaction spans one partition, so nothing groups them."""
        for product in {product.sku: product for product in products}.values():
            self._table.upsert_entity(_entity(product), mode=UpdateMode.REPLACE)


def _entity(product: Product) -> dict[str, str]:
    return {
        "PartitionKey": table_key(product.sku),
        "RowKey": _ROW,
        "Sku": product.sku,
        "Name": product.name,
        "Price": str(product.price),
        "Currency": product.currency,
        "Description": product.description,
    }
