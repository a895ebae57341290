"""Accepting an order: validate it and enqueue its five tasks as one session."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from ..domain.orders import parse_order
from ..domain.pipelines import purchase_messages
from .ports import TaskSender

# Fixed namespace: the same Idempotency-Key always yields the same job id.
_JOB_NAMESPACE = uuid.UUID("6f1c6f55-6a55-4f1e-9d55-3c3f0d5c2a11")


@dataclass(frozen=True)
class SubmittedOrder:
    job_id: str
    session_id: str
    queue_name: str
    tasks: tuple[str, ...]


def submit_order(
    document: Any,
    *,
    sender: TaskSender,
    queue_name: str,
    idempotency_key: str | None = None,
) -> SubmittedOrder:
    """Raises ``InvalidInput`` naming the field to fix. With an idempotency key, a repeated
    request maps to the same job and the same message ids, so duplicate detection drops it."""
    order = parse_order(document)
    if idempotency_key:
        job_id = str(uuid.uuid5(_JOB_NAMESPACE, idempotency_key))
    else:
        job_id = str(uuid.uuid4())
    session_id = job_id
    messages = purchase_messages(job_id, order)
    sender.send_session(queue_name, session_id, messages)
    return SubmittedOrder(job_id, session_id, queue_name, tuple(m.task for m in messages))
