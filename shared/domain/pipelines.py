"""The two pipelines and how a job becomes the ordered messages of one session."""

from __future__ import annotations

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


def stops_on_failure(pipeline: str | None) -> bool:
    """Whether nothing after a failed task of the pipeline may run (purchase), so that every
    later message of the session is dead-lettered too; an import row that fails is set aside
    and the rest of the session goes on. The processors in ``shared.bootstrap`` are wired with
    the matching policy. An unknown pipeline is treated as stopping: the careful choice."""
    return pipeline != PRODUCT_IMPORT


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
    return TaskMessage(
        job_id=job_id,
        pipeline=PRODUCT_IMPORT,
        task=IMPORT_PRODUCT,
        step=step,
        is_last=is_last,
        payload=dict(row),
    )
