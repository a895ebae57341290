"""What an order, an import row and an import session cost in Service Bus operations and
Storage requests, measured through the whole stack as bench.operation_counts measures them,
against the table in docs/capacity.md: the capacity model's inputs. A count that grows fails
here before it shrinks the capacity the doc promises."""

from __future__ import annotations

from pathlib import Path

from bench.operation_counts import documented, measure_orders, measure_rows

from .conftest import E2E

DOC = Path(__file__).resolve().parents[2] / "docs" / "capacity.md"


def test_orders_rows_and_sessions_cost_what_the_capacity_doc_says(
    e2e: E2E, catalogue: None
) -> None:
    # Given the documented costs
    expected = documented(DOC.read_text(encoding="utf-8"))

    # When two paid orders, then an import session of 2 rows and one of 4, go through the stack
    orders = measure_orders(e2e.stack, e2e.otlp, "E2E-TEA", 2)
    rows = measure_rows(e2e.stack, e2e.otlp, 2)

    # Then each costs, by service, entity and kind, what the doc's table says
    assert orders.per_item == expected["order"]
    assert rows.per_row == expected["row"]
    assert rows.per_session == expected["session"]
