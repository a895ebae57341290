"""A product row of an import, checked field by field."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from .currencies import ISO_4217
from .errors import InvalidInput

_SKU = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_CURRENCY = re.compile(r"^[A-Z]{3}$")
MAX_PRICE = Decimal("1000000")


def check_sku(field: str, sku: str) -> None:
    """The rule for a SKU wherever one comes in (a product row, an order line)."""
    if not _SKU.match(sku):
        raise InvalidInput(
            field, "must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )


def check_currency(field: str, currency: str) -> None:
    """The rule for a currency wherever one comes in (a product row, an order)."""
    if not _CURRENCY.match(currency):
        raise InvalidInput(field, "must be a three-letter ISO 4217 code such as EUR")
    if currency not in ISO_4217:
        raise InvalidInput(
            field,
            f"must be a currency of ISO 4217 in circulation such as EUR; {currency} is not one",
        )


@dataclass(frozen=True)
class Product:
    sku: str
    name: str
    price: Decimal
    currency: str
    description: str = ""

    def to_payload(self) -> dict[str, Any]:
        return {
            "sku": self.sku,
            "name": self.name,
            "price": str(self.price),
            "currency": self.currency,
            "description": self.description,
        }


def parse_product(row: Any) -> Product:
    """Raise ``InvalidInput`` naming the missing or wrong field."""
    if not isinstance(row, Mapping):
        raise InvalidInput("row", "must be an object")
    sku = _text(row, "sku")
    check_sku("sku", sku)
    name = _text(row, "name")
    price = _price(row.get("price"))
    currency = _text(row, "currency").upper()
    check_currency("currency", currency)
    description = row.get("description") or ""
    if not isinstance(description, str):
        raise InvalidInput("description", "must be text")
    return Product(sku, name, price, currency, description.strip())


def _text(row: Mapping[str, Any], name: str) -> str:
    value = row.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise InvalidInput(name, "is missing")
    if not isinstance(value, str):
        raise InvalidInput(name, "must be text")
    return value.strip()


def _price(value: Any) -> Decimal:
    if value is None or value == "":
        raise InvalidInput("price", "is missing")
    if isinstance(value, bool):
        raise InvalidInput("price", "must be a number")
    try:
        price = Decimal(str(value))
    except InvalidOperation as error:
        raise InvalidInput("price", f"must be a number, got {value!r}") from error
    if not price.is_finite() or price <= 0:
        raise InvalidInput("price", f"must be greater than 0, got {value}")
    if price > MAX_PRICE:
        raise InvalidInput("price", f"must be at most {MAX_PRICE}")
    if price != price.quantize(Decimal("0.01")):
        raise InvalidInput("price", "must have at most two decimals")
    return price.quantize(Decimal("0.01"))
