"""Documents the tests of several packages build the same way."""

from __future__ import annotations

from typing import Any


def order_document(**changes: Any) -> dict[str, Any]:
    """A valid order as POST /api/orders takes it (one line of SKU-1), with ``changes``."""
    return {
        "customer_email": "ada@example.com",
        "customer_name": "Ada",
        "card_token": "tok_visa",
        "currency": "EUR",
        "lines": [{"sku": "SKU-1", "quantity": 2}],
        **changes,
    }
