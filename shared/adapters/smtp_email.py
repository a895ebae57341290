"""E-mail over SMTP with the standard library.

Whatever the text holds, the message can be sent: the body goes quoted-printable (7-bit, any
line length, control characters escaped), a lone surrogate becomes U+FFFD, and the recipient is
written on the envelope and in the To header as an SMTP mailbox (quoted when needed, the domain
in IDNA form, SMTPUTF8 only for a non-ASCII local part).
"""

from __future__ import annotations

import smtplib
import ssl
from email.message import EmailMessage
from email.policy import SMTP, SMTPUTF8
from email.utils import formatdate

from ..domain.errors import PermanentTaskError, TransientTaskError
from ..domain.mailboxes import Mailbox
from ..service_layer.ports import Email, Repeatability
from .email_messages import REJECTED, UNAVAILABLE, customer_mailbox, scalar_values


class SmtpEmailSender:
    """One connection per e-mail (receipts are few; a pooled connection would go stale).

    SMTP has no repeatable requests: a repeat sends the e-mail again (``repeatable`` False),
    so ``ReceiptMailer`` records an attempt before the conversation and does not repeat one
    that a crash cut short.

    Failures are sorted the way SMTP means them: no connection, a dropped connection, a
    timeout or a 4xx reply are ``TransientTaskError`` (try again later); a refused recipient,
    a 5xx reply or a server that cannot do what the settings ask are ``PermanentTaskError``.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        sender: str,
        username: str | None = None,
        password: str | None = None,
        starttls: bool = False,
        timeout: float = 10.0,
    ) -> None:
        self._host = host
        self._port = port
        self._sender = sender
        self._username = username
        self._password = password
        self._starttls = starttls
        self._timeout = timeout

    name = "smtp"
    repeatable = False

    def send(self, email: Email, *, repeat: Repeatability | None = None) -> str:
        """Deliver ``email`` to the server and return its Message-ID, or raise a transient or
        permanent task error (``repeat`` is not used: SMTP has nothing to carry it)."""
        to = customer_mailbox(email.to)
        server = f"{self._host}:{self._port}"
        try:
            with smtplib.SMTP(self._host, self._port, timeout=self._timeout) as smtp:
                if self._starttls:
                    smtp.starttls(context=ssl.create_default_context())
                if self._username:
                    smtp.login(self._username, self._password or "")
                smtp.ehlo_or_helo_if_needed()
                if to.needs_smtputf8 and not smtp.has_extn("smtputf8"):
                    raise PermanentTaskError(
                        REJECTED,
                        f"The mail server {server} does not take internationalised addresses "
                        f"(SMTPUTF8), which {to.address()} needs. Point SMTP_HOST at a server "
                        "that does, then replay the message.",
                    )
                # The envelope names the recipient itself, as an SMTP mailbox: parsing it back
                # out of the To header would turn a malformed address into another one.
                smtp.sendmail(
                    self._sender,
                    [to.address()],
                    self._message(email, to).as_bytes(
                        policy=SMTPUTF8 if to.needs_smtputf8 else SMTP
                    ),
                    mail_options=("SMTPUTF8", "BODY=8BITMIME") if to.needs_smtputf8 else (),
                )
        except smtplib.SMTPRecipientsRefused as error:
            codes = [code for code, _ in error.recipients.values()]
            replies = "; ".join(
                f"{recipient}: {code} {_text(reply)}"
                for recipient, (code, reply) in error.recipients.items()
            )
            if codes and all(400 <= code < 500 for code in codes):
                raise TransientTaskError(
                    UNAVAILABLE,
                    f"The mail server {server} cannot take mail for {email.to} right now "
                    f"({replies}). The e-mail will be sent again later.",
                ) from error
            raise PermanentTaskError(
                REJECTED,
                f"The mail server {server} refused the recipient ({replies}). Check the "
                "customer's e-mail address, correct it and send the receipt again.",
            ) from error
        except smtplib.SMTPAuthenticationError as error:
            raise PermanentTaskError(
                REJECTED,
                f"The mail server {server} refused the login of {self._username} "
                f"({error.smtp_code} {_text(error.smtp_error)}). Fix SMTP_USERNAME and "
                "SMTP_PASSWORD, then replay the message.",
            ) from error
        except smtplib.SMTPResponseException as error:
            # SMTPSenderRefused, SMTPDataError, SMTPHeloError, ...: the reply code decides.
            reply = f"{error.smtp_code} {_text(error.smtp_error)}"
            if 400 <= error.smtp_code < 500:
                raise TransientTaskError(
                    UNAVAILABLE,
                    f"The mail server {server} asked to try again later ({reply}). "
                    "The e-mail will be sent again.",
                ) from error
            raise PermanentTaskError(
                REJECTED,
                f"The mail server {server} rejected the e-mail to {email.to} ({reply}). Fix "
                f"what the reply names (the sender {self._sender}, SMTP_STARTTLS, "
                "SMTP_USERNAME/SMTP_PASSWORD or the message), then replay the message.",
            ) from error
        except smtplib.SMTPNotSupportedError as error:
            raise PermanentTaskError(
                REJECTED,
                f"The mail server {server} does not support what the settings ask for "
                f"({error}). Check SMTP_STARTTLS, SMTP_USERNAME and SMTP_PASSWORD.",
            ) from error
        except ssl.SSLCertVerificationError as error:
            raise PermanentTaskError(
                REJECTED,
                f"The certificate of the mail server {server} is not trusted "
                f"({error.verify_message}). Fix SMTP_HOST or the server's certificate.",
            ) from error
        except (smtplib.SMTPException, OSError) as error:
            # Refused or reset connections, timeouts, a server that hung up: all may pass.
            raise TransientTaskError(
                UNAVAILABLE,
                f"Could not deliver the e-mail to the mail server {server} "
                f"({type(error).__name__}: {error}). It will be sent again later; if this "
                "keeps happening, check that the server runs and SMTP_HOST/SMTP_PORT.",
            ) from error

        return email.message_id

    def _message(self, email: Email, to: Mailbox) -> EmailMessage:
        message = EmailMessage()
        message["From"] = self._sender
        message["To"] = to.address()
        message["Subject"] = scalar_values(email.subject)
        message["Date"] = formatdate(usegmt=True)
        message_id = email.message_id.strip()
        if not message_id.startswith("<"):
            message_id = f"<{message_id}>"
        message["Message-ID"] = message_id
        message.set_content(scalar_values(email.text), cte="quoted-printable")
        for attachment in email.attachments:
            maintype, _, subtype = attachment.content_type.partition("/")
            message.add_attachment(
                attachment.content,
                maintype=maintype,
                subtype=subtype or "octet-stream",
                filename=attachment.filename,
            )
        return message


def _text(reply: bytes | str) -> str:
    return reply.decode("utf-8", "replace") if isinstance(reply, bytes) else reply
