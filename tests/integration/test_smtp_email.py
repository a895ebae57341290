from __future__ import annotations

import pytest

from localdev.azurite import free_port
from shared.adapters.pdf_receipts import ReportLabReceiptRenderer
from shared.adapters.smtp_email import SmtpEmailSender
from shared.domain.errors import PermanentTaskError, TransientTaskError
from shared.service_layer.ports import Attachment, Email

from .conftest import SmtpInbox
from .test_receipt_pdf import RECEIPT

pytestmark = pytest.mark.integration


def receipt_email(to: str = "ada@example.com") -> Email:
    pdf = ReportLabReceiptRenderer().render(RECEIPT)
    return Email(
        to=to,
        subject="Your receipt for order ORD-00000042",
        text="Hello Ada,\n\nyour receipt is attached.\n",
        message_id="<job-1.receipt@pipelines.local>",
        attachments=(Attachment("ORD-00000042.pdf", "application/pdf", pdf),),
    )


def test_the_receipt_reaches_the_smtp_server_with_the_pdf_attached(
    smtp_inbox: SmtpInbox,
) -> None:
    email = receipt_email()
    sender = SmtpEmailSender(smtp_inbox.host, smtp_inbox.port, sender="receipts@shop.example")

    sender.send(email)

    assert smtp_inbox.envelopes == [("receipts@shop.example", ["ada@example.com"])]
    [received] = smtp_inbox.messages
    assert received["To"] == "ada@example.com"
    assert received["From"] == "receipts@shop.example"
    assert received["Subject"] == "Your receipt for order ORD-00000042"
    assert received["Message-ID"] == "<job-1.receipt@pipelines.local>"
    body = received.get_body(preferencelist=("plain",))
    assert body is not None and "your receipt is attached" in body.get_content()
    [attachment] = list(received.iter_attachments())
    assert attachment.get_filename() == "ORD-00000042.pdf"
    assert attachment.get_content_type() == "application/pdf"
    assert attachment.get_content() == email.attachments[0].content


def test_a_message_id_without_brackets_is_bracketed(smtp_inbox: SmtpInbox) -> None:
    sender = SmtpEmailSender(smtp_inbox.host, smtp_inbox.port, sender="receipts@shop.example")

    sender.send(Email("bob@example.com", "Hi", "text", "plain-id@pipelines.local"))

    assert smtp_inbox.messages[0]["Message-ID"] == "<plain-id@pipelines.local>"


def test_no_server_listening_is_a_transient_failure() -> None:
    sender = SmtpEmailSender("127.0.0.1", free_port(), sender="receipts@shop.example", timeout=2)

    with pytest.raises(TransientTaskError) as unavailable:
        sender.send(receipt_email())

    assert unavailable.value.reason == "EmailServerUnavailable"
    assert "SMTP_HOST" in unavailable.value.description


def test_a_refused_recipient_is_a_permanent_failure(smtp_inbox: SmtpInbox) -> None:
    smtp_inbox.rcpt_replies["gone@example.com"] = "550 5.1.1 No such user here"
    sender = SmtpEmailSender(smtp_inbox.host, smtp_inbox.port, sender="receipts@shop.example")

    with pytest.raises(PermanentTaskError) as rejected:
        sender.send(receipt_email(to="gone@example.com"))

    assert rejected.value.reason == "EmailRejected"
    assert "No such user here" in rejected.value.description
    assert "e-mail address" in rejected.value.description
    assert smtp_inbox.messages == []


def test_a_recipient_put_off_with_4xx_is_a_transient_failure(smtp_inbox: SmtpInbox) -> None:
    smtp_inbox.rcpt_replies["busy@example.com"] = "450 4.2.1 Mailbox busy, try later"
    sender = SmtpEmailSender(smtp_inbox.host, smtp_inbox.port, sender="receipts@shop.example")

    with pytest.raises(TransientTaskError) as later:
        sender.send(receipt_email(to="busy@example.com"))

    assert later.value.reason == "EmailServerUnavailable"
    assert "Mailbox busy" in later.value.description
    assert smtp_inbox.messages == []


def test_a_malformed_address_is_refused_not_sent_elsewhere(smtp_inbox: SmtpInbox) -> None:
    sender = SmtpEmailSender(smtp_inbox.host, smtp_inbox.port, sender="receipts@shop.example")

    with pytest.raises(PermanentTaskError):
        sender.send(receipt_email(to="not an address@@example.com"))

    assert smtp_inbox.messages == []
