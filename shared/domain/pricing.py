"""Order totals, in exact decimal arithmetic."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from .orders import OrderLine

CENT = Decimal("0.01")


@dataclass(frozen=True)
class Totals:
    subtotal: Decimal
    tax: Decimal
    shipping: Decimal
    total: Decimal

    def as_context(self) -> dict[str, str]:
        return {
            "subtotal": str(self.subtotal),
            "tax": str(self.tax),
            "shipping": str(self.shipping),
            "total": str(self.total),
        }


def calculate_totals(
    lines: Sequence[OrderLine],
    unit_prices: Mapping[str, Decimal],
    *,
    tax_rate: Decimal,
    shipping: Decimal,
) -> Totals:
    subtotal = sum((unit_prices[line.sku] * line.quantity for line in lines), Decimal("0"))
    subtotal = subtotal.quantize(CENT, ROUND_HALF_UP)
    tax = (subtotal * tax_rate).quantize(CENT, ROUND_HALF_UP)
    shipping = shipping.quantize(CENT, ROUND_HALF_UP)
    return Totals(subtotal, tax, shipping, subtotal + tax + shipping)
