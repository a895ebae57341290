"""The purchase: an order's five tasks, stopping at the first failure. Started by
``POST /api/orders`` and followed at ``GET /api/orders/{job_id}``
(``shared.entrypoints.orders_http``, with its Idempotency-Key rules and the order's status);
its tasks are ``shared.service_layer.purchase_tasks``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..orders import parse_order
from . import PURCHASE, PURCHASE_TASKS, FailurePolicy, Pipeline

ORDER_NUMBERS_TABLE = "ordernumbers"
PAYMENTS_TABLE = "simulatedpayments"
ORDER_PROGRESS_TABLE = "orderprogress"
RECEIPT_EMAILS_TABLE = "receiptemails"


def checked_order(document: Mapping[str, Any]) -> dict[str, Any]:
    """The order as its tasks get it: ``parse_order``'s checks, then its canonical form."""
    return parse_order(document).to_payload()


PIPELINE = Pipeline(
    name=PURCHASE,
    tasks=PURCHASE_TASKS,
    policy=FailurePolicy.STOP_ON_FAILURE,
    queue_setting="PURCHASE_QUEUE_NAME",
    default_queue="purchase-tasks",
    check_payload=checked_order,
    route="orders",
    own_routes=True,
    tables=(ORDER_NUMBERS_TABLE, PAYMENTS_TABLE, ORDER_PROGRESS_TABLE, RECEIPT_EMAILS_TABLE),
    listed=10,
)
