"""Orders: accepting one (validate it, enqueue its five tasks as one session, record it) and
telling where it stands."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from ..domain.archive import SessionNotArchived
from ..domain.idempotency import fingerprint
from ..domain.order_status import OrderNotFound, OrderStatus, order_status
from ..domain.orders import Order, parse_order
from ..domain.payments import payment_idempotency_key
from ..domain.pipelines import PURCHASE_TASKS, purchase_messages
from .clock import Clock, utc_now
from .history import Progress, replay_chain
from .idempotency import IdempotentRequests
from .operator_ports import AuditTrail
from .ports import (
    DeadLetterArchive,
    OrderNumbers,
    OrderProgress,
    PaymentGateway,
    SessionOutcomes,
    TaskSender,
)

# Fixed namespace: the same Idempotency-Key always yields the same job id.
_JOB_NAMESPACE = uuid.UUID("6f1c6f55-6a55-4f1e-9d55-3c3f0d5c2a11")
SCOPE = "orders"


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
    requests: IdempotentRequests | None = None,
    progress: OrderProgress | None = None,
    clock: Clock = utc_now,
) -> SubmittedOrder:
    """Raises ``InvalidInput`` naming the field to fix, before anything is sent.

    With an idempotency key the job id derives from the key, so the same message ids go out
    again and duplicate detection drops a repeat; with ``requests`` too, a repeat with the same
    order gets the first result without sending anything, the key with another order is
    refused (``IdempotencyKeyReused``) and a repeat while the first is in flight is refused
    (``IdempotencyKeyInFlight``)."""
    order = parse_order(document)

    def submit(job_id: str) -> SubmittedOrder:
        return _enqueue(order, job_id, sender, queue_name, progress, clock)

    if not idempotency_key:
        return submit(str(uuid.uuid4()))
    job_id = str(uuid.uuid5(_JOB_NAMESPACE, idempotency_key))
    if requests is None:
        return submit(job_id)
    result = requests.run(
        SCOPE, idempotency_key, fingerprint(order.to_payload()), lambda: asdict(submit(job_id))
    )
    return _submitted(result)


def _enqueue(
    order: Order,
    job_id: str,
    sender: TaskSender,
    queue_name: str,
    progress: OrderProgress | None,
    clock: Clock,
) -> SubmittedOrder:
    session_id = job_id
    messages = purchase_messages(job_id, order)
    sender.send_session(queue_name, session_id, messages)
    if progress is not None:  # after the send: an order recorded as accepted was enqueued
        progress.accept(job_id, session_id, clock().isoformat())
    return SubmittedOrder(job_id, session_id, queue_name, tuple(m.task for m in messages))


def _submitted(result: Mapping[str, Any]) -> SubmittedOrder:
    return SubmittedOrder(
        job_id=result["job_id"],
        session_id=result["session_id"],
        queue_name=result["queue_name"],
        tasks=tuple(result["tasks"]),
    )


@dataclass(frozen=True)
class OrderLookup:
    """Where orders stand, read from everything that records them."""

    progress: OrderProgress
    order_numbers: OrderNumbers
    payments: PaymentGateway
    archive: DeadLetterArchive
    audit: AuditTrail
    sessions: SessionOutcomes

    def status(self, job_id: str) -> OrderStatus:
        """Where the order stands (``shared.domain.order_status``), with the replays of its
        failed session and their outcomes. Raises ``OrderNotFound`` when nothing was recorded
        of it."""
        record = self.progress.find(job_id)
        if record is None:
            raise OrderNotFound(job_id)
        session_id = record.session_id or job_id
        try:
            claim = self.archive.get_summary(session_id).claim
        except SessionNotArchived:
            claim = None
        charge = self.payments.find(payment_idempotency_key(job_id))
        status = order_status(
            record,
            PURCHASE_TASKS,
            order_number=self.order_numbers.find(job_id),
            charged=(charge.amount, charge.currency) if charge else None,
            failure=self.archive.find_record(session_id),
            claim=claim,
        )
        if claim is None:
            return status
        chain = replay_chain(self.archive, self.audit, Progress(self.sessions), session_id)
        return replace(status, replays=tuple(chain))

    def find(self, reference: str) -> OrderStatus:
        """The order ``reference`` names: a job id, else an order number. Raises
        ``OrderNotFound`` when it is neither."""
        if self.progress.find(reference) is not None:
            return self.status(reference)
        job_id = self.order_numbers.job_of(reference)
        if job_id is None:
            raise OrderNotFound(reference)
        return self.status(job_id)
