"""An order as the HTTP API accepts it, checked field by field.

Whatever passes can be charged, rendered and mailed: text fields are Unicode scalar values
(no lone surrogates) without bidi controls (a U+202E in a name shows it reversed on the
receipt and in the console), the currency is one of ISO 4217, and the e-mail address is a
mailbox an SMTP server can take (``mailboxes.parse_mailbox``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import InvalidInput
from .json_documents import check_text
from .mailboxes import parse_mailbox
from .products import check_currency, check_sku

MAX_LINES = 100
MAX_QUANTITY = 1000
MAX_TEXT = 256
# Unicode's Bidi_Control characters: the marks, embeddings, overrides and isolates.
BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


@dataclass(frozen=True)
class OrderLine:
    """A product of the catalogue and how many of it."""

    sku: str
    quantity: int


@dataclass(frozen=True)
class Order:
    customer_email: str
    customer_name: str
    card_token: str
    currency: str
    lines: tuple[OrderLine, ...]

    def to_payload(self) -> dict[str, Any]:
        return {
            "customer_email": self.customer_email,
            "customer_name": self.customer_name,
            "card_token": self.card_token,
            "currency": self.currency,
            "lines": [{"sku": line.sku, "quantity": line.quantity} for line in self.lines],
        }


def parse_order(document: Any) -> Order:
    """Raise ``InvalidInput`` naming the first field that is wrong, and how to fix it."""
    if not isinstance(document, Mapping):
        raise InvalidInput("body", "must be a JSON object")
    email = _required_str(document, "customer_email")
    parse_mailbox(email, field="customer_email")  # only an address the receipt can be sent to
    name = _required_str(document, "customer_name")
    card_token = _required_str(document, "card_token")
    currency = _required_str(document, "currency")
    check_currency("currency", currency)
    raw_lines = document.get("lines")
    if not isinstance(raw_lines, list):
        raise InvalidInput("lines", "is required: an array of {sku, quantity}")
    if not raw_lines:
        raise InvalidInput("lines", "must hold at least one line")
    if len(raw_lines) > MAX_LINES:
        raise InvalidInput("lines", f"must hold at most {MAX_LINES} lines")
    lines = tuple(_parse_line(raw, f"lines[{index}]") for index, raw in enumerate(raw_lines))
    return Order(email, name, card_token, currency, lines)


def _parse_line(raw: Any, where: str) -> OrderLine:
    if not isinstance(raw, Mapping):
        raise InvalidInput(where, "must be an object {sku, quantity}")
    sku = _required_str(raw, "sku", where=where)
    check_sku(f"{where}.sku", sku)
    quantity = raw.get("quantity")
    if not isinstance(quantity, int) or isinstance(quantity, bool):
        raise InvalidInput(f"{where}.quantity", "is required: a whole number")
    if quantity < 1:
        raise InvalidInput(f"{where}.quantity", f"must be at least 1, got {quantity}")
    if quantity > MAX_QUANTITY:
        raise InvalidInput(f"{where}.quantity", f"must be at most {MAX_QUANTITY}")
    return OrderLine(sku, quantity)


def _required_str(document: Mapping[str, Any], name: str, *, where: str = "") -> str:
    path = f"{where}.{name}" if where else name
    value = document.get(name)
    if value is None:
        raise InvalidInput(path, "is required")
    if not isinstance(value, str):
        raise InvalidInput(path, "must be a string")
    check_text(path, value)
    bidi = next((c for c in value if c in BIDI_CONTROLS), None)
    if bidi is not None:
        raise InvalidInput(
            path,
            f"must not contain the bidi control U+{ord(bidi):04X}, which changes how the text "
            "around it is shown: send the text without it",
        )
    value = value.strip()
    if not value:
        raise InvalidInput(path, "must not be empty")
    if len(value) > MAX_TEXT:
        raise InvalidInput(path, f"must be at most {MAX_TEXT} characters")
    return value
