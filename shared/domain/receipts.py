"""What a receipt says. Rendering it (PDF) is an adapter's job."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True)
class ReceiptLine:
    sku: str
    name: str
    quantity: int
    unit_price: Decimal
    amount: Decimal


@dataclass(frozen=True)
class Receipt:
    order_number: str
    customer_name: str
    customer_email: str
    currency: str
    lines: tuple[ReceiptLine, ...]
    subtotal: Decimal
    tax: Decimal
    shipping: Decimal
    total: Decimal
    charge_id: str
    issued_at: str  # ISO 8601, UTC
