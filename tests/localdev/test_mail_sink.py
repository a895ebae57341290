"""The local stack's SMTP sink: what it received, parsed on demand, and a wait for arrivals."""

from __future__ import annotations

import smtplib
from email.message import EmailMessage

import pytest

from localdev.mail_sink import run_mail_sink


def _mail(n: int) -> EmailMessage:
    message = EmailMessage()
    message["From"] = "shop@pipelines.local"
    message["To"] = f"customer-{n}@example.com"
    message["Subject"] = f"Receipt {n}"
    message["Message-ID"] = f"<job-{n}.receipt@pipelines.local>"
    message.set_content(f"Thank you for order {n}.")
    message.add_attachment(b"%PDF-1.4 receipt", maintype="application", subtype="pdf")
    return message


def test_the_sink_keeps_each_message_and_wakes_a_waiting_watcher() -> None:
    with run_mail_sink() as sink:
        assert not sink.wait_for_more(0, timeout=0.05)
        with smtplib.SMTP(sink.host, sink.port) as smtp:
            smtp.send_message(_mail(1))
            smtp.send_message(_mail(2))
        assert sink.wait_for_more(1, timeout=5)

        assert sink.message_ids() == [
            "<job-1.receipt@pipelines.local>",
            "<job-2.receipt@pipelines.local>",
        ]
        assert sink.message_ids(1) == ["<job-2.receipt@pipelines.local>"]
        received = sink.received()
        assert [str(m["Subject"]) for m in received] == ["Receipt 1", "Receipt 2"]
        body = received[0].get_body(preferencelist=("plain",))
        assert body is not None and "order 1" in body.get_content()
        [attachment] = received[1].iter_attachments()
        assert attachment.get_content() == b"%PDF-1.4 receipt"
        assert sink.received()[0] is received[0]  # parsed once
        assert sink.count() == 2


def test_the_sink_logs_each_recipient_as_the_client_sent_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Encoded words mean nothing on the envelope: this is its own mailbox, not x@example.com.
    recipient = "=?utf-8?q?x?=@example.com"
    with run_mail_sink(echo=True) as sink:
        with smtplib.SMTP(sink.host, sink.port) as smtp:
            smtp.sendmail("shop@pipelines.local", [recipient], _mail(1).as_bytes())
        assert sink.wait_for_more(0, timeout=5)

    assert capsys.readouterr().out == f"[smtp] Receipt 1 -> {recipient}\n"
