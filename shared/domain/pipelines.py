"""The two pipelines and how a job becomes the ordered messages of one session."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from .envelope import TaskMessage
from .orders import Order

PURCHASE = "purchase"
PRODUCT_IMPORT = "product_import"

GENERATE_ORDER_NUMBER = "GenerateOrderNumber"
CALCULATE_TOTAL = "CalculateTotal"
PROCESS_PAYMENT = "ProcessPayment"
GENERATE_RECEIPT = "GenerateReceipt"
SEND_RECEIPT_EMAIL = "SendReceiptEmail"
PURCHASE_TASKS = (
    GENERATE_ORDER_NUMBER,
    CALCULATE_TOTAL,
    PROCESS_PAYMENT,
    GENERATE_RECEIPT,
    SEND_RECEIPT_EMAIL,
)

IMPORT_PRODUCT = "ImportProduct"


class FailurePolicy(enum.Enum):
    """What a failed task means for the rest of its session."""

    STOP_ON_FAILURE = "stop-on-failure"  # nothing after a failed task may run
    CONTINUE_ON_FAILURE = "continue-on-failure"  # the failed message is set aside, the rest run


def failure_policy(pipeline: str | None) -> FailurePolicy:
    """A purchase stops at its first failure, so every later message of the session is
    dead-lettered too; an import row that fails is set aside and the rest of the session goes
    on. An unknown pipeline stops: the careful choice."""
    if pipeline == PRODUCT_IMPORT:
        return FailurePolicy.CONTINUE_ON_FAILURE
    return FailurePolicy.STOP_ON_FAILURE


def stops_on_failure(pipeline: str | None) -> bool:
    return failure_policy(pipeline) is FailurePolicy.STOP_ON_FAILURE


def purchase_messages(job_id: str, order: Order) -> list[TaskMessage]:
    """The five tasks of one purchase, in the order they must run."""
    payload = order.to_payload()
    return [
        TaskMessage(
            job_id=job_id,
            pipeline=PURCHASE,
            task=task,
            step=step,
            is_last=step == len(PURCHASE_TASKS),
            payload=payload,
        )
        for step, task in enumerate(PURCHASE_TASKS, start=1)
    ]


def import_message(job_id: str, step: int, *, is_last: bool, row: Mapping[str, Any]) -> TaskMessage:
    return TaskMessage(job_id, PRODUCT_IMPORT, IMPORT_PRODUCT, step, is_last, dict(row))
