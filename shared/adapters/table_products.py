"""The product catalog in Azure Tables: products spread over a few partitions by a hash of
their SKU, so that an import batch's rows are written in a few entity-group transactions."""

from __future__ import annotations

import zlib
from collections import defaultdict
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableClient, UpdateMode

from ..domain.products import Product
from .azure_errors import TABLE_STORAGE, translated
from .table_batches import upsert_in_transactions
from .table_keys import table_key
from .table_product_move import LEGACY_ROW, ProductMove, move_legacy_products
from .table_transactions import TableTransactions

PARTITIONS = 8


def partition_of(sku: str) -> str:
    """The partition a SKU's product lives in: one of ``PARTITIONS``, by CRC-32 of the SKU,
    the same in every process. Starts with ``!``, which no escaped value does
    (``table_keys``), so it never meets a key of the layout before it."""
    return f"!products-{zlib.crc32(sku.encode('utf-8')) % PARTITIONS}"


class TableProductCatalog:
    """PartitionKey = ``partition_of(sku)``, RowKey = the SKU. A lookup is a point read; an
    import batch's products are upserted in one transaction per partition they fall in (at
    most ``PARTITIONS`` per 100 rows, where one partition per SKU took one request per row).
    Each partition carries Table Storage's 2,000 entities/s (docs/capacity.md). Prices are
    stored as text: a table double would turn 19.99 into 19.989999..., and money must stay
    exact.

    Products written under the earlier layout (PartitionKey = the SKU, RowKey ``product``)
    are still found, and ``move_legacy_products`` moves them (docs/deploy.md). A product's
    columns are the same in both layouts; a moved one has ``MovedFrom`` besides.

    ``transactions``: what sends the transactions (``table_transactions``), the SDK without."""

    def __init__(self, table: TableClient, transactions: TableTransactions | None = None) -> None:
        self._table = table
        self._transactions = transactions

    @translated(TABLE_STORAGE)
    def find(self, skus: Sequence[str]) -> dict[str, Product]:
        """The products that exist among ``skus``; unknown SKUs are left out."""
        found: dict[str, Product] = {}
        for sku in dict.fromkeys(skus):
            entity = self._read(partition_of(sku), table_key(sku)) or self._read(
                table_key(sku), LEGACY_ROW
            )
            if entity is not None:
                found[sku] = _product(entity)
        return found

    @translated(TABLE_STORAGE)
    def upsert(self, product: Product) -> None:
        """Create or replace the product: importing the same row twice leaves one product."""
        self._table.upsert_entity(_entity(product), mode=UpdateMode.REPLACE)

    @translated(TABLE_STORAGE)
    def upsert_many(self, products: Sequence[Product]) -> None:
        """Create or replace the products, the last of a SKU kept, in one transaction per
        partition (and per 100 products)."""
        by_partition: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for product in {product.sku: product for product in products}.values():
            by_partition[partition_of(product.sku)].append(_entity(product))
        for entities in by_partition.values():
            upsert_in_transactions(self._table, entities, transactions=self._transactions)

    @translated(TABLE_STORAGE)
    def move_legacy_products(self) -> ProductMove:
        """Move the products written under the earlier layout to their partitions, never
        over a newer write of them (``table_product_move``); run again after an interruption
        or a skip, it goes on where it stopped."""
        return move_legacy_products(self._table, lambda sku: (partition_of(sku), table_key(sku)))

    def _read(self, partition: str, row: str) -> dict[str, Any] | None:
        try:
            return dict(self._table.get_entity(partition, row))
        except ResourceNotFoundError:
            return None


def _product(entity: dict[str, Any]) -> Product:
    return Product(
        sku=str(entity["Sku"]),
        name=str(entity["Name"]),
        price=Decimal(str(entity["Price"])),
        currency=str(entity["Currency"]),
        description=str(entity.get("Description") or ""),
    )


def _entity(product: Product) -> dict[str, str]:
    return {
        "PartitionKey": partition_of(product.sku),
        "RowKey": table_key(product.sku),
        "Sku": product.sku,
        "Name": product.name,
        "Price": str(product.price),
        "Currency": product.currency,
        "Description": product.description,
    }
