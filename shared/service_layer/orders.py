"""Where orders stand. An order is accepted by the generic start of the purchase's jobs
(``shared.service_layer.jobs.start_job``, which records it in the order progress); how far it
got is read from its sessions' outcomes, their failure records and its tasks' effects
(``shared.domain.order_status``)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..domain.archive import SessionNotArchived
from ..domain.order_status import (
    COMPLETED,
    OrderNotFound,
    OrderRecord,
    OrderStatus,
    known_steps,
    order_status,
)
from ..domain.payments import payment_idempotency_key
from ..domain.pipelines import PURCHASE, PURCHASE_TASKS
from ..domain.receipt_emails import SENDING, SENT, ReceiptEmail
from ..domain.session_outcomes import FAILED
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
        sessions = [s for s in self.sessions.of_job(job_id) if s.pipeline == PURCHASE]
        failures = {
            s.session_id: found
            for s in sessions
            if s.status == FAILED and (found := self.archive.find_record(s.session_id))
        }
        if session_id not in failures and (first := self.archive.find_record(session_id)):
            failures[session_id] = first
        order_number = self.order_numbers.find(job_id)
        charge = self.payments.find(payment_idempotency_key(job_id))
        receipt_email = self.receipt_emails.find(job_id)
        # The effects of the tasks that ran: an order number (step 1), a charge (steps 2 and
        # 3), a receipt e-mail's record (step 4, the receipt it sends, done).
        effects = 4 if receipt_email else 3 if charge else 1 if order_number else 0
        record = known_steps(record, PURCHASE_TASKS, sessions, failures, done_by_effects=effects)
        latest_failed = [s for s in sessions if s.session_id in failures and s.status == FAILED]
        cause = failures.get(latest_failed[-1].session_id) if latest_failed else None
        status = order_status(
            record,
            PURCHASE_TASKS,
            order_number=order_number,
            charged=(charge.amount, charge.currency) if charge else None,
            failure=cause or failures.get(session_id),
            claim=claim,
        )
        status = replace(status, receipt_email=_sent_if_completed(receipt_email, record))
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


def _sent_if_completed(
    receipt_email: ReceiptEmail | None, record: OrderRecord
) -> ReceiptEmail | None:
    """The receipt e-mail's record as the order's status tells it: a record still
    ``sending`` whose task completed was sent (a repeatable send that succeeded at its first
    attempt is not written again: ``ReceiptMailer``); the mail service's id of the send is its
    request id."""
    if receipt_email is None or receipt_email.status != SENDING:
        return receipt_email
    last = next((s for s in record.steps if s.step == len(PURCHASE_TASKS)), None)
    if last is None or last.status != COMPLETED:
        return receipt_email
    return replace(receipt_email, status=SENT, operation_id=receipt_email.request_id)
