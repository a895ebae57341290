"""The purchase: an order's five tasks, stopping at the first failure. Started by
``POST /api/orders`` and followed at ``GET /api/orders/{job_id}``
(``shared.entrypoints.orders_http``, with its Idempotency-Key rules and the order's status)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...domain.orders import parse_order
from ...domain.pipelines import PURCHASE, PURCHASE_TASKS, FailurePolicy
from ..observers import order_progress_observer
from ..purchase_tasks import PurchaseDependencies, purchase_tasks
from . import Pipeline

if TYPE_CHECKING:
    from ...bootstrap import Container
    from ..session_messages import Task


def _tasks(c: Container) -> dict[str, Task]:
    return purchase_tasks(
        PurchaseDependencies(
            order_numbers=c.order_numbers,
            catalog=c.catalog,
            payments=c.payments,
            receipts=c.receipts,
            renderer=c.receipt_renderer,
            email=c.email,
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
    check_payload=parse_order,
    build_tasks=_tasks,
    observer=lambda c: order_progress_observer(c.order_progress),
    route="orders",
    own_routes=True,
    listed=10,
)
