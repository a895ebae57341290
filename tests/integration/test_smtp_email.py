from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from email import message_from_string, policy
from email.message import EmailMessage

import pytest
from aiosmtpd.controller import Controller

from localdev.azurite import free_port
from shared.adapters.pdf_receipts import ReportLabReceiptRenderer
from shared.adapters.smtp_email import SmtpEmailSender
from shared.domain.errors import PermanentTaskError, TaskFailed, TransientTaskError
from shared.domain.mailboxes import parse_mailbox
from shared.domain.orders import Order, parse_order
from shared.service_layer.ports import Attachment, Email
from shared.service_layer.purchase_tasks import receipt_email as purchase_receipt
from tests.builders import order_document

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
    sender = smtp_inbox.sender()

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
    sender = smtp_inbox.sender()

    sender.send(Email("bob@example.com", "Hi", "text", "plain-id@pipelines.local"))

    assert smtp_inbox.messages[0]["Message-ID"] == "<plain-id@pipelines.local>"


def test_no_server_listening_is_a_transient_failure() -> None:
    sender = SmtpEmailSender("127.0.0.1", free_port(), sender="receipts@shop.example", timeout=2)

    with pytest.raises(TransientTaskError) as unavailable:
        sender.send(receipt_email())

    assert unavailable.value.reason == "EmailServerUnavailable"
    assert "SMTP_HOST" in unavailable.value.description


@pytest.mark.parametrize(
    ("reply", "error", "reason", "described_by"),
    [
        # Refused for good (5xx): a permanent failure that names what to fix.
        (
            "550 5.1.1 No such user here",
            PermanentTaskError,
            "EmailRejected",
            ("No such user here", "e-mail address"),
        ),
        # Put off (4xx): a transient failure, retried.
        (
            "450 4.2.1 Mailbox busy, try later",
            TransientTaskError,
            "EmailServerUnavailable",
            ("Mailbox busy",),
        ),
    ],
    ids=["refused-5xx-permanent", "put-off-4xx-transient"],
)
def test_a_recipient_refused_is_a_permanent_failure_and_put_off_a_transient_one(
    smtp_inbox: SmtpInbox,
    reply: str,
    error: type[TaskFailed],
    reason: str,
    described_by: tuple[str, ...],
) -> None:
    smtp_inbox.rcpt_replies["someone@example.com"] = reply
    sender = smtp_inbox.sender()

    with pytest.raises(error) as failed:
        sender.send(receipt_email(to="someone@example.com"))

    assert failed.value.reason == reason
    assert all(text in failed.value.description for text in described_by)
    assert smtp_inbox.messages == []


def test_a_malformed_address_is_refused_not_sent_elsewhere(smtp_inbox: SmtpInbox) -> None:
    sender = smtp_inbox.sender()

    with pytest.raises(PermanentTaskError):
        sender.send(receipt_email(to="not an address@@example.com"))

    assert smtp_inbox.messages == []


# Anything the API accepts can be mailed ---------------------------------------------------------
def order(email: str, name: str) -> Order:
    return parse_order(
        order_document(
            customer_email=email, customer_name=name, lines=[{"sku": "MUG-1", "quantity": 1}]
        )
    )


ACCEPTED = {
    "non-ASCII name": ("ada@example.com", "Zoë Ünïcødé 山田太郎 Ωμέγα"),
    "emoji and right-to-left script": ("ada@example.com", "Ada 🚀👩🏽‍💻 עדה علي"),
    "256 characters, one word": ("ada@example.com", "x" * 256),
    "control characters and a line break": ("ada@example.com", "A\x00da\x1b[1m\r\nBcc: e@x.io"),
    "non-ASCII local part and domain": ("jösé@exämple.com", "José"),
    "emoji local part": ("🚀@example.com", "Ada"),
    "non-ASCII domain only": ("ada@bücher.example", "Ada"),
    "specials in the local part": ("a<b>,c!#$%&'*+/=?^_`{|}~d@example.com", "Ada"),
    "the longest local part": ("é" * 32 + "@example.com", "Ada"),
}


@pytest.mark.parametrize("case", ACCEPTED, ids=list(ACCEPTED))
def test_a_receipt_for_anything_the_api_accepts_reaches_the_smtp_server(
    smtp_inbox: SmtpInbox, case: str
) -> None:
    email, name = ACCEPTED[case]
    pdf = ReportLabReceiptRenderer().render(replace(RECEIPT, customer_name=name))
    sender = smtp_inbox.sender()

    sender.send(purchase_receipt("job-7", order(email, name), "ORD-00000007", "12.50", pdf))

    assert_mailed(smtp_inbox, email, f"Hello {name},")


def test_a_lone_surrogate_already_in_a_message_is_mailed_as_a_replacement_character(
    smtp_inbox: SmtpInbox,
) -> None:
    # Not a character: the API refuses it, but a message sent before it did may carry one.
    order_with_surrogate = replace(order("ada@example.com", "Ada"), customer_name="Ada \ud800")
    sender = smtp_inbox.sender()

    sender.send(purchase_receipt("job-8", order_with_surrogate, "ORD-00000008", "1.00", b"%PDF-"))

    assert_mailed(smtp_inbox, "ada@example.com", "Hello Ada \ufffd,")


def assert_mailed(inbox: SmtpInbox, email: str, greeting: str) -> None:
    mailbox = parse_mailbox(email)
    assert inbox.envelopes == [("receipts@shop.example", [mailbox.address()])]
    [raw] = inbox.raw
    # Headers may be UTF-8 (SMTPUTF8): the bytes parser would read them as ASCII.
    received = message_from_string(raw.decode("utf-8"), policy=policy.default)
    assert isinstance(received, EmailMessage)
    [to] = received["To"].addresses
    assert (to.username, to.domain) == (
        mailbox.local,
        mailbox.domain if mailbox.needs_smtputf8 else mailbox.ascii_domain,
    )
    body = received.get_body(preferencelist=("plain",))
    assert body is not None and greeting in body.get_content()
    assert all(len(line) <= 998 for line in raw.split(b"\r\n"))  # SMTP's line limit
    [attachment] = list(received.iter_attachments())
    assert attachment.get_content().startswith(b"%PDF-")


@pytest.fixture
def ascii_only_inbox() -> Iterator[SmtpInbox]:
    """A real SMTP server that does not offer SMTPUTF8 (many still do not)."""
    host = "127.0.0.1"
    inbox = SmtpInbox(host=host, port=free_port(host))
    controller = Controller(inbox, hostname=host, port=inbox.port, enable_SMTPUTF8=False)
    controller.start()
    yield inbox
    controller.stop()


def test_a_non_ascii_domain_needs_no_smtputf8(ascii_only_inbox: SmtpInbox) -> None:
    inbox = ascii_only_inbox
    sender = inbox.sender()

    sender.send(purchase_receipt("job-9", order("ada@bücher.example", "Ada"), "O-9", "1", b""))

    assert inbox.envelopes == [("receipts@shop.example", ["ada@xn--bcher-kva.example"])]


def test_a_non_ascii_local_part_on_a_server_without_smtputf8_names_the_setting_to_fix(
    ascii_only_inbox: SmtpInbox,
) -> None:
    inbox = ascii_only_inbox
    sender = inbox.sender()

    with pytest.raises(PermanentTaskError) as refused:
        sender.send(purchase_receipt("job-10", order("jösé@example.com", "José"), "O", "1", b""))

    assert "SMTPUTF8" in refused.value.description and "SMTP_HOST" in refused.value.description
    assert inbox.messages == []
