"""Where orders stand. An order is accepted by the generic start of the purchase's jobs
(``shared.service_layer.jobs.start_job``, which records it in the order progress too)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..domain.archive import SessionNotArchived
from ..domain.order_status import OrderNotFound, OrderStatus, order_status
from ..domain.payments import payment_idempotency_key
from ..domain.pipelines import PURCHASE_TASKS
from .history import Progress, replay_chain
from .operator_ports import AuditTrail
from .ports import (
    DeadLetterArchive,
    OrderNumbers,
    OrderProgress,
    PaymentGateway,
    ReceiptEmails,
    SessionOutcomes,
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
    receipt_emails: ReceiptEmails

    def status(self, job_id: str) -> OrderStatus:
        """Where the order stands (``shared.domain.order_status``), with its receipt e-mail's
        record and the replays of its failed session and their outcomes. Raises
        ``OrderNotFound`` when nothing was recorded of it."""
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
        status = replace(status, receipt_email=self.receipt_emails.find(job_id))
        if claim is None:
            return status
        chain = replay_chain(self.archive, self.audit, Progress(self.sessions), session_id)
        return replace(status, replays=tuple(chain))

    def find(self, reference: str) -> OrderStatus:
        """The order ``reference`` names: a job id, else an order number. Raises
        ``OrderNotFound`` when it is neither."""
        if self.progress.find(reference) is not None:
            return self.status(reference)
        job_id = self.order_numbers.find_job(reference)
        if job_id is None:
            raise OrderNotFound(reference)
        return self.status(job_id)
