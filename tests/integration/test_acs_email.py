"""The receipt through Azure Communication Services Email (the app's adapter and its client,
built as the app builds them) against the local stand-in, with the receipt's record in a real
Azurite table: the PDF attached, one mail across a crash between the send and the writes
after it, the 412 past the window recorded as "may have been sent", and the errors sorted.
SMTP's record before the conversation is checked here too."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from azure.data.tables import TableClient

from localdev.email_http import RunningEmailService, run_email_service
from localdev.ports import free_port
from shared.adapters.acs_email import AcsEmailSender, email_client
from shared.adapters.table_receipt_emails import TableReceiptEmails
from shared.config import EmailServiceConnectionSettings
from shared.domain.errors import PermanentTaskError, TransientTaskError
from shared.domain.receipt_emails import (
    MAY_HAVE_BEEN_SENT,
    SENDING,
    SENT,
    ReceiptEmail,
    receipt_request_id,
)
from shared.service_layer.ports import Email
from shared.service_layer.receipt_mailer import ReceiptMailer

from .conftest import SmtpInbox
from .test_smtp_email import receipt_email

pytestmark = pytest.mark.integration

SENDER = "DoNotReply@shop.example"


class Crash(Exception):
    """The worker dying between the send and the writes after it."""


@pytest.fixture(scope="module")
def stand_in() -> Iterator[RunningEmailService]:
    with run_email_service(drop=frozenset({"dropped@example.com"})) as running:
        yield running


def acs(running: RunningEmailService) -> AcsEmailSender:
    connection = EmailServiceConnectionSettings(connection_string=running.connection_string)
    return AcsEmailSender(email_client(connection), sender=SENDER, endpoint=running.endpoint)


def mails_to(running: RunningEmailService, job_id: str) -> int:
    wanted = f"<{job_id}.receipt@pipelines.local>"
    return sum(1 for m in running.received() if m["Message-ID"] == wanted)


def job_email(job_id: str, to: str = "ada@example.com") -> Email:
    return replace(receipt_email(to), message_id=f"<{job_id}.receipt@pipelines.local>")


def test_the_receipt_arrives_with_its_pdf_and_the_record_keeps_its_request(
    stand_in: RunningEmailService, table: TableClient
) -> None:
    records = TableReceiptEmails(table)
    email = job_email("job-acs-1")

    record = ReceiptMailer(records, acs(stand_in)).deliver("job-acs-1", 5, email)

    assert record.status == SENT and record.operation_id == receipt_request_id("job-acs-1", 5)
    (mail,) = [m for m in stand_in.received() if m["Message-ID"] == email.message_id]
    assert (mail["From"], mail["To"]) == (SENDER, "ada@example.com")
    (attachment,) = mail.iter_attachments()
    assert attachment.get_filename() == "ORD-00000042.pdf"
    assert attachment.get_content() == email.attachments[0].content
    stored = records.find("job-acs-1")
    # sent at the first attempt: the record keeps the request and its first-sent time for
    # any later attempt, and the task's completion tells it was sent
    assert stored is not None and (stored.status, stored.sender) == (SENDING, "acs")
    assert stored.request_id == record.request_id and stored.first_sent == record.first_sent


def test_a_crash_between_the_send_and_the_writes_repeats_the_request_and_mails_once(
    stand_in: RunningEmailService, table: TableClient
) -> None:
    records = TableReceiptEmails(table)
    email = job_email("job-acs-2")

    def crash(job_id: str) -> None:
        raise Crash(job_id)

    with pytest.raises(Crash):
        ReceiptMailer(records, acs(stand_in), after_send=crash).deliver("job-acs-2", 5, email)
    assert records.find("job-acs-2").status == SENDING  # type: ignore[union-attr]

    record = ReceiptMailer(records, acs(stand_in)).deliver("job-acs-2", 5, email)

    assert (record.status, record.attempts) == (SENT, 2)
    assert mails_to(stand_in, "job-acs-2") == 1


def test_past_the_window_the_412_is_recorded_may_have_been_sent_and_nothing_is_mailed(
    stand_in: RunningEmailService, table: TableClient
) -> None:
    # Given: an attempt cut short six minutes ago, its outcome never recorded
    records = TableReceiptEmails(table)
    records.save(
        ReceiptEmail(
            "job-acs-3",
            "ada@example.com",
            SENDING,
            receipt_request_id("job-acs-3", 5),
            datetime.now(UTC) - timedelta(minutes=6),
            "acs",
        )
    )

    # When: the task runs again
    record = ReceiptMailer(records, acs(stand_in)).deliver("job-acs-3", 5, job_email("job-acs-3"))

    # Then: the service answered 412; nothing was sent, the record says so for a person
    assert record.status == MAY_HAVE_BEEN_SENT
    assert record.detail is not None and "cannot tell whether it went out" in record.detail
    assert records.find("job-acs-3").status == MAY_HAVE_BEEN_SENT  # type: ignore[union-attr]
    assert mails_to(stand_in, "job-acs-3") == 0


def test_a_dropped_e_mail_is_a_permanent_failure(stand_in: RunningEmailService) -> None:
    with pytest.raises(PermanentTaskError) as failed:
        acs(stand_in).send(job_email("job-acs-4", to="dropped@example.com"))

    assert failed.value.reason == "EmailRejected"
    assert "EmailDropped" in failed.value.description


def test_a_wrong_key_is_a_permanent_failure_naming_the_setting(
    stand_in: RunningEmailService,
) -> None:
    wrong = EmailServiceConnectionSettings(
        connection_string=f"endpoint={stand_in.endpoint}/;accesskey=bm90LXRoZS1rZXk="
    )
    sender = AcsEmailSender(email_client(wrong), sender=SENDER, endpoint=stand_in.endpoint)

    with pytest.raises(PermanentTaskError) as refused:
        sender.send(job_email("job-acs-5"))

    assert "CommunicationServicesConnection" in refused.value.description


def test_an_unreachable_service_is_a_transient_failure() -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    connection = EmailServiceConnectionSettings(
        connection_string=f"endpoint={endpoint}/;accesskey=bm90LXRoZS1rZXk="
    )
    sender = AcsEmailSender(email_client(connection), sender=SENDER, endpoint=endpoint)

    with pytest.raises(TransientTaskError) as unavailable:
        sender.send(job_email("job-acs-6"))

    assert unavailable.value.reason == "EmailServerUnavailable"


def test_smtp_records_the_attempt_before_the_conversation_and_never_repeats_one_cut_short(
    smtp_inbox: SmtpInbox, table: TableClient
) -> None:
    records = TableReceiptEmails(table)
    email = job_email("job-smtp-1")

    def crash(job_id: str) -> None:
        raise Crash(job_id)

    with pytest.raises(Crash):
        ReceiptMailer(records, smtp_inbox.sender(), after_send=crash).deliver(
            "job-smtp-1", 5, email
        )
    assert records.find("job-smtp-1").status == SENDING  # type: ignore[union-attr]

    record = ReceiptMailer(records, smtp_inbox.sender()).deliver("job-smtp-1", 5, email)

    assert record.status == MAY_HAVE_BEEN_SENT and record.sender == "smtp"
    assert len(smtp_inbox.messages) == 1
