"""A job's receipt e-mail, sent once across redeliveries, instances, crashes and replays.

The record of the e-mail (``ReceiptEmails``, kept by the job) is written before the first
attempt, with the request id derived from the job and step and the time of that attempt; each
later attempt sends the same request. With a repeatable sender (Azure Communication Services
Email) the service carries a request out once within its window, so an attempt cut short
after the service accepted it (a kill between the send and the writes after it, a Storage
outage) is simply repeated: the service answers what it answered first. A record already
``sent`` or ``may-have-been-sent`` is not sent again (a replay of the session, or a redelivery
after the state write failed). Past the service's window it answers that it cannot tell
(``MayHaveBeenSent``): the record says so and nothing is sent. With a sender that cannot repeat
safely (SMTP), an attempt found ``sending`` was cut short in the middle of the conversation:
it is recorded ``may-have-been-sent`` rather than sent again.

The record is why the first-sent time survives a replay: a replay runs the task in a new
session, whose state starts empty, and a first-sent time taken afresh there would make the
service treat the repeat as a new request and send it again. The session state keeps what the
task returns (the outcome), not a second copy of the record.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from ..domain.errors import MayHaveBeenSent, PermanentTaskError, TransientTaskError
from ..domain.receipt_emails import (
    FAILED,
    MAY_HAVE_BEEN_SENT,
    RETRYING,
    SENDING,
    SENT,
    ReceiptEmail,
    receipt_request_id,
)
from .clock import Clock, utc_now
from .ports import Email, EmailSender, ReceiptEmails, Repeatability

logger = logging.getLogger(__name__)

CUT_SHORT = (
    "An earlier attempt to send this receipt was cut short (the worker stopped) during the "
    "conversation with the mail server, which cannot be repeated safely: it may or may not "
    "have been delivered. Ask the customer or check the mail server's log for the Message-ID "
    "before sending it again."
)


@dataclass(frozen=True)
class ReceiptMailer:
    records: ReceiptEmails
    sender: EmailSender
    clock: Clock = utc_now
    # Called with the job id once the service has carried the send out, before anything
    # records it: a fault-injection point for the crash tests (shared.bootstrap.faults).
    after_send: Callable[[str], None] | None = None

    def deliver(self, job_id: str, step: int, email: Email) -> ReceiptEmail:
        """Send ``email`` as the receipt of ``job_id`` (its task at ``step``) unless its record
        says it went out (or may have); returns the record as it ends. Raises the sender's
        transient or permanent task error, after recording it."""
        record = self._attempt(job_id, step, email)
        if record.settled:
            return record
        repeat = Repeatability(record.request_id, record.first_sent)
        try:
            operation_id = self.sender.send(email, repeat=repeat)
        except MayHaveBeenSent as answer:
            return self.records.save(
                replace(record, status=MAY_HAVE_BEEN_SENT, detail=answer.description)
            )
        except PermanentTaskError as error:
            self.records.save(replace(record, status=FAILED, detail=error.description))
            raise
        except TransientTaskError as error:
            self.records.save(replace(record, status=RETRYING, detail=error.description))
            raise
        if self.after_send is not None:
            self.after_send(job_id)
        sent = replace(record, status=SENT, operation_id=operation_id, detail=None)
        if self.sender.repeatable and record.attempts == 1:
            # The first attempt of a repeatable request: the record stays ``sending``, and the
            # task's completion tells that it was sent (``OrderLookup``). An attempt that
            # finds the record (a redelivery, a retry, a replay) repeats the request, and
            # writes ``sent`` when the service answers.
            return sent
        return self.records.save(sent)

    def _attempt(self, job_id: str, step: int, email: Email) -> ReceiptEmail:
        """The record this attempt sends under, written before it sends (or the settled
        record, when nothing is to be sent). The first attempt's write is one insert."""
        first = self._new(job_id, step, email, generation=1)
        record = self.records.create(first)
        if record is None:
            return first
        if record.settled:
            logger.info("The receipt of %s is %s: not sent again", job_id, record.status)
            return record
        if record.status == FAILED:  # refused before: a new request (a replay after a fix)
            return self.records.save(self._new(job_id, step, email, record.generation + 1))
        if record.status == SENDING and not self.sender.repeatable:
            return self.records.save(replace(record, status=MAY_HAVE_BEEN_SENT, detail=CUT_SHORT))
        return self.records.save(
            replace(record, status=SENDING, attempts=record.attempts + 1, to=email.to)
        )

    def _new(self, job_id: str, step: int, email: Email, generation: int) -> ReceiptEmail:
        return ReceiptEmail(
            job_id=job_id,
            to=email.to,
            status=SENDING,
            request_id=receipt_request_id(job_id, step, generation),
            first_sent=self.clock(),
            sender=self.sender.name,
            generation=generation,
        )
