"""``python -m shared.bootstrap.move_products``: move the products written under the catalog's
earlier layout (one partition per SKU) to the partitions ``TableProductCatalog`` uses now, in
the Storage account the app's settings name (``AzureWebJobsStorage`` or its identity-based
form). The app finds products in either layout, so the move can run while it serves; running
it again moves what is left."""

from __future__ import annotations

from ..adapters.table_products import TableProductCatalog
from . import container


def main() -> None:
    catalog = container().catalog
    assert isinstance(catalog, TableProductCatalog)
    print(f"moved {catalog.move_legacy_products()} product(s) to the partitioned layout")


if __name__ == "__main__":
    main()
