"""The purchase's and the import's names and task names, the failure policies, and how a job
becomes the ordered messages of one session. Each pipeline is declared once, with its queue
setting and its policy, in ``shared.service_layer.pipelines``."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
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


def job_messages(
    job_id: str, pipeline: str, tasks: Sequence[str], payload: Mapping[str, Any]
) -> list[TaskMessage]:
    """Every task of one job, in the order they must run, each carrying ``payload``."""
    return [
        TaskMessage(
            job_id=job_id,
            pipeline=pipeline,
            task=task,
            step=step,
            is_last=step == len(tasks),
            payload=dict(payload),
        )
        for step, task in enumerate(tasks, start=1)
    ]


def purchase_messages(job_id: str, order: Order) -> list[TaskMessage]:
    """The five tasks of one purchase, in the order they must run."""
    return job_messages(job_id, PURCHASE, PURCHASE_TASKS, order.to_payload())


def import_message(job_id: str, step: int, *, is_last: bool, row: Mapping[str, Any]) -> TaskMessage:
    return TaskMessage(job_id, PRODUCT_IMPORT, IMPORT_PRODUCT, step, is_last, dict(row))
