"""ReceiptMailer: a job's receipt is recorded before it is sent, sent once across crashes,
redeliveries and replays, and never sent again when the service cannot tell whether it was."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from shared.domain.errors import PermanentTaskError, TransientTaskError
from shared.domain.receipt_emails import (
    FAILED,
    MAY_HAVE_BEEN_SENT,
    RETRYING,
    SENDING,
    SENT,
    ReceiptEmail,
    receipt_request_id,
)
from shared.service_layer.ports import Email, Repeatability
from shared.service_layer.receipt_mailer import ReceiptMailer
from tests.fakes import InMemoryEmailSender, InMemoryReceiptEmails

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
EMAIL = Email("ada@example.com", "Your receipt", "Thank you.", "<job-1.receipt@pipelines.local>")


class Crash(Exception):
    """The worker dying at a point of the test's choosing."""


class Sender(InMemoryEmailSender):
    """Records what the receipt's record said at the moment of each send, and can fail."""

    def __init__(self, records: InMemoryReceiptEmails, *, repeatable: bool = True) -> None:
        super().__init__(repeatable=repeatable)
        self.records = records
        self.seen: list[ReceiptEmail | None] = []
        self.repeats: list[Repeatability | None] = []
        self.fail: Exception | None = None

    def send(self, email: Email, *, repeat: Repeatability | None = None) -> str:
        self.seen.append(self.records.find("job-1"))
        self.repeats.append(repeat)
        if self.fail is not None:
            raise self.fail
        return super().send(email, repeat=repeat)


def mailer(records: InMemoryReceiptEmails, sender: Sender, **options: object) -> ReceiptMailer:
    return ReceiptMailer(records, sender, clock=lambda: T0, **options)  # type: ignore[arg-type]


def test_the_record_is_written_before_the_first_attempt_with_the_request_the_job_names() -> None:
    records = InMemoryReceiptEmails()
    sender = Sender(records)

    record = mailer(records, sender).deliver("job-1", 5, EMAIL)

    (before,) = sender.seen
    assert before is not None and before.status == SENDING
    assert sender.repeats == [Repeatability(receipt_request_id("job-1", 5), T0)]
    assert (record.status, record.operation_id, record.attempts) == (SENT, "op-1", 1)
    # A repeatable request sent at its first attempt is not written again: the task's
    # completion tells it was sent (the order's status reads it so)
    assert records.find("job-1") == replace(record, status=SENDING, operation_id=None)


def test_a_crash_after_the_send_repeats_the_same_request_and_mails_once() -> None:
    # Given: the service sent the receipt, then the worker died before anything recorded it
    records = InMemoryReceiptEmails()
    sender = Sender(records)

    def die(job_id: str) -> None:
        raise Crash(job_id)

    with pytest.raises(Crash):
        mailer(records, sender, after_send=die).deliver("job-1", 5, EMAIL)
    assert records.find("job-1").status == SENDING  # type: ignore[union-attr]

    # When: the redelivery (another instance, later) runs the task again
    later = ReceiptMailer(records, sender, clock=lambda: T0 + timedelta(minutes=2))
    record = later.deliver("job-1", 5, EMAIL)

    # Then: the same request (its first-sent time kept), one e-mail
    assert (
        sender.repeats[0] == sender.repeats[1] == Repeatability(receipt_request_id("job-1", 5), T0)
    )
    assert len(sender.sent) == 1
    assert (record.status, record.attempts) == (SENT, 2)


def test_a_receipt_recorded_sent_is_not_sent_again_by_a_replay() -> None:
    # Given: a receipt sent at its first attempt, then again by a redelivery (the state
    # write after the first failed), which records it sent
    records = InMemoryReceiptEmails()
    sender = Sender(records)
    mailer(records, sender).deliver("job-1", 5, EMAIL)
    again = mailer(records, sender).deliver("job-1", 5, EMAIL)
    assert (again.status, again.attempts) == (SENT, 2)
    assert records.find("job-1") == again and len(sender.sent) == 1

    # When: a replay runs the task again
    record = mailer(records, sender).deliver("job-1", 5, EMAIL)

    # Then: nothing is sent
    assert record.status == SENT
    assert len(sender.seen) == 2 and len(sender.sent) == 1


def test_past_the_window_the_service_cannot_tell_and_nothing_is_sent() -> None:
    records = InMemoryReceiptEmails()
    sender = Sender(records)
    sender.outside_window.add(receipt_request_id("job-1", 5))

    record = mailer(records, sender).deliver("job-1", 5, EMAIL)

    assert record.status == MAY_HAVE_BEEN_SENT
    assert sender.sent == []
    assert mailer(records, sender).deliver("job-1", 5, EMAIL).status == MAY_HAVE_BEEN_SENT
    assert len(sender.seen) == 1  # a replay does not try again either


def test_an_smtp_attempt_cut_short_is_recorded_may_have_been_sent_not_sent_again() -> None:
    records = InMemoryReceiptEmails()
    records.save(
        ReceiptEmail(
            "job-1", "ada@example.com", SENDING, receipt_request_id("job-1", 5), T0, "smtp"
        )
    )
    sender = Sender(records, repeatable=False)

    record = mailer(records, sender).deliver("job-1", 5, EMAIL)

    assert record.status == MAY_HAVE_BEEN_SENT
    assert record.detail is not None and "cut short" in record.detail
    assert sender.seen == []


def test_a_transient_failure_is_recorded_and_the_next_attempt_repeats_the_request() -> None:
    records = InMemoryReceiptEmails()
    sender = Sender(records, repeatable=False)
    sender.fail = TransientTaskError("EmailServerUnavailable", "try later")

    with pytest.raises(TransientTaskError):
        mailer(records, sender).deliver("job-1", 5, EMAIL)
    assert records.find("job-1").status == RETRYING  # type: ignore[union-attr]

    sender.fail = None
    record = mailer(records, sender).deliver("job-1", 5, EMAIL)

    assert record.status == SENT and len(sender.sent) == 1
    assert sender.repeats[0] == sender.repeats[1]


def test_after_a_refusal_the_next_attempt_is_a_new_request() -> None:
    # Given: the service refused the receipt (a bad address), the session failed
    records = InMemoryReceiptEmails()
    sender = Sender(records)
    sender.fail = PermanentTaskError("EmailRejected", "bad address")
    with pytest.raises(PermanentTaskError):
        mailer(records, sender).deliver("job-1", 5, EMAIL)
    assert records.find("job-1").status == FAILED  # type: ignore[union-attr]

    # When: the session is replayed after the address was corrected, later
    sender.fail = None
    later = ReceiptMailer(records, sender, clock=lambda: T0 + timedelta(hours=1))
    record = later.deliver("job-1", 5, replace(EMAIL, to="ada@example.org"))

    # Then: a new request (the refused one's id would be past its window or mismatched)
    assert record.status == SENT and record.generation == 2
    assert sender.repeats[1] == Repeatability(
        receipt_request_id("job-1", 5, 2), T0 + timedelta(hours=1)
    )
    assert receipt_request_id("job-1", 5, 2) != receipt_request_id("job-1", 5)
