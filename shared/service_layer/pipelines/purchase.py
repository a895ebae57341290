"""The purchase: an order's five tasks, stopping at the first failure. Started by
``POST /api/orders`` and followed at ``GET /api/orders/{job_id}``
(``shared.entrypoints.orders_http``, with its Idempotency-Key rules and the order's status)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...domain.orders import parse_order
from ...domain.pipelines import PURCHASE, PURCHASE_TASKS, FailurePolicy
from ..observers import order_progress_observer
from ..purchase_tasks import PurchaseDependencies, purchase_tasks
from . import Pipeline

if TYPE_CHECKING:
    from ...bootstrap import Container
    from ..session_messages import Task


def _checked_order(document: Mapping[str, Any]) -> dict[str, Any]:
    """The order as its tasks get it: ``parse_order``'s checks, then its canonical form."""
    return parse_order(document).to_payload()


def _tasks(c: Container) -> dict[str, Task]:
    return purchase_tasks(
        PurchaseDependencies(
            order_numbers=c.order_numbers,
            catalog=c.catalog,
            payments=c.payments,
            receipts=c.receipts,
            renderer=c.receipt_renderer,
            mailer=c.receipt_mailer,
            tax_rate=c.settings.tax_rate,
            shipping_fee=c.settings.shipping_fee,
        )
    )


PIPELINE = Pipeline(
    name=PURCHASE,
    tasks=PURCHASE_TASKS,
    policy=FailurePolicy.STOP_ON_FAILURE,
    queue_setting="PURCHASE_QUEUE_NAME",
    default_queue="purchase-tasks",
    check_payload=_checked_order,
    build_tasks=_tasks,
    observer=lambda c: order_progress_observer(c.order_progress),
    route="orders",
    own_routes=True,
    listed=10,
)
