"""What the demo sends, and what must come of it.

Every failure is designed: a declined card, cards that hit a payment provider outage, a SKU the
catalogue does not have, and a message a buggy client put straight on the queue. Everything
else must complete.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CATALOGUE = Path(__file__).resolve().parent.parent / "demo_data" / "products.csv"
# What the Spark job and the import tasks must make of the catalogue above.
CATALOGUE_ROWS = 24
CATALOGUE_REJECTED = 1  # DESK-LAMP: two fields, not five
CATALOGUE_INVALID = {"InvalidProduct:price": 1, "InvalidProduct:currency": 1}

DECLINED_CARD = "tok_declined"  # in PAYMENT_SIMULATOR_DECLINE_TOKENS
# The simulated provider is down for these cards until the demo ends the outage.
OUTAGE_CARDS = ("tok_amex_0005", "tok_amex_0017", "tok_amex_0029")
UNKNOWN_SKU = "UNICORN-TEA"

COMPLETE = "complete"


@dataclass(frozen=True)
class PlannedOrder:
    name: str
    order: dict[str, Any]
    expect: str  # COMPLETE or "<failed task>: <reason>"

    @property
    def card(self) -> str:
        return str(self.order["card_token"])


_CUSTOMERS = (
    "Ada Lovelace",
    "Grace Hopper",
    "Alan Turing",
    "Katherine Johnson",
    "Edsger Dijkstra",
    "Barbara Liskov",
    "Donald Knuth",
    "Margaret Hamilton",
    "Ken Thompson",
    "Frances Allen",
    "John Backus",
    "Radia Perlman",
    "Dennis Ritchie",
    "Hedy Lamarr",
    "Niklaus Wirth",
    "Shafi Goldwasser",
    "Tony Hoare",
)
_BASKETS = (
    [("TEA-ASSAM", 2), ("MUG-WHITE", 1)],
    [("POT-CAST", 1), ("STRAINER-STEEL", 2)],
    [("MATCHA-TIN", 1), ("WHISK-BAMBOO", 1), ("BOWL-MATCHA", 1)],
    [("TEA-EARLGREY", 3)],
    [("KETTLE-GOOSE", 1), ("TIMER-SAND", 1)],
    [("HONEY-ACACIA", 2), ("SUGAR-CUBES", 1), ("BISCUIT-TIN", 2)],
    [("TEA-SENCHA", 1), ("POT-GLASS", 1)],
)


def planned_orders() -> list[PlannedOrder]:
    """17 orders: 12 that complete and 5 designed to fail, mixed as they would arrive."""
    failing = {
        3: (DECLINED_CARD, None, "ProcessPayment: PaymentDeclined"),
        5: (OUTAGE_CARDS[0], None, "ProcessPayment: PaymentProviderUnavailable"),
        9: (None, UNKNOWN_SKU, "CalculateTotal: UnknownSku"),
        11: (OUTAGE_CARDS[1], None, "ProcessPayment: PaymentProviderUnavailable"),
        14: (OUTAGE_CARDS[2], None, "ProcessPayment: PaymentProviderUnavailable"),
    }
    orders = []
    for index, customer in enumerate(_CUSTOMERS):
        card, extra_sku, expect = failing.get(index, (None, None, COMPLETE))
        lines = [{"sku": sku, "quantity": n} for sku, n in _BASKETS[index % len(_BASKETS)]]
        if extra_sku:
            lines.append({"sku": extra_sku, "quantity": 1})
        first = customer.split()[0].lower()
        orders.append(
            PlannedOrder(
                name=customer,
                order={
                    "customer_email": f"{first}@example.com",
                    "customer_name": customer,
                    "card_token": card or f"tok_visa_{4000 + index}",
                    "currency": "EUR",
                    "lines": lines,
                },
                expect=expect,
            )
        )
    return orders


# A message a buggy client wrote straight to the purchase queue: the JSON is cut short.
MALFORMED_BODY = b'{"job_id": "hand-written", "pipeline": "purchase", "task": "Generate'
MALFORMED_EXPECT = "(unreadable message): MalformedMessage"


def expected_failures(orders: list[PlannedOrder]) -> Counter[str]:
    """ "<task>: <reason>" -> number of purchase sessions that must fail that way."""
    counts = Counter(o.expect for o in orders if o.expect != COMPLETE)
    counts[MALFORMED_EXPECT] += 1
    return counts
