"""``python -m shared.bootstrap.move_products``: move the products written under the catalog's
earlier layout (one partition per SKU) to the partitions ``TableProductCatalog`` uses now, in
the Storage account the app's settings name (``AzureWebJobsStorage`` or its identity-based
form). The app finds products in either layout, so the move can run while it serves. It never
writes over a newer write of a product (``shared.adapters.table_product_move``), prints what
it moved, kept and skipped, and exits with 1 when it skipped any (written while it ran): run
it again until it exits with 0 (docs/deploy.md, "Upgrading")."""

from __future__ import annotations

import sys

from ..adapters.table_products import TableProductCatalog
from . import container


def main() -> int:
    catalog = container().catalog
    assert isinstance(catalog, TableProductCatalog)
    move = catalog.move_legacy_products()
    print(move.summary())
    return 1 if move.skipped else 0


if __name__ == "__main__":
    sys.exit(main())
