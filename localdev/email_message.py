"""One e-mail as the Communication Services Email stand-in (``localdev.email_service``) took
it: read from the ``EmailMessage`` body of a send (the REST reference's required fields
checked: ``senderAddress``, ``content.subject``, ``recipients.to``; attachments base64), and
shown as a mail client would see it."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Any


@dataclass(frozen=True)
class SentEmail:
    """One message the stand-in accepted, as its request described it."""

    operation_id: str
    request_id: str | None
    sender: str
    to: tuple[str, ...]
    subject: str
    plain_text: str
    html: str
    headers: Mapping[str, str]
    attachments: tuple[tuple[str, str, bytes], ...]  # name, content type, content

    def as_message(self) -> EmailMessage:
        """The message as a mail client would see it (custom headers included)."""
        message = EmailMessage()
        message["From"] = self.sender
        message["To"] = ", ".join(self.to)
        message["Subject"] = self.subject
        for name, value in self.headers.items():
            message[name] = value
        if "Message-ID" not in message:
            message["Message-ID"] = f"<{self.operation_id}@email.local>"
        message.set_content(self.plain_text)
        if self.html:
            message.add_alternative(self.html, subtype="html")
        for name, content_type, content in self.attachments:
            maintype, _, subtype = content_type.partition("/")
            message.add_attachment(content, maintype=maintype, subtype=subtype, filename=name)
        return message


def parse_message(document: Any, request_id: str | None) -> SentEmail:
    if not isinstance(document, dict):
        raise ValueError("The body must be an EmailMessage object.")
    sender = document.get("senderAddress")
    content = document.get("content")
    recipients = document.get("recipients")
    if not isinstance(sender, str) or "@" not in sender:
        raise ValueError("senderAddress is required: an e-mail address.")
    if not isinstance(content, dict) or not isinstance(content.get("subject"), str):
        raise ValueError("content.subject is required.")
    if not isinstance(recipients, dict) or not recipients.get("to"):
        raise ValueError("recipients.to needs at least one address.")
    to = []
    for recipient in recipients["to"]:
        address = recipient.get("address") if isinstance(recipient, dict) else None
        if not isinstance(address, str) or "@" not in address:
            raise ValueError(f"recipients.to: {recipient!r} has no valid address.")
        to.append(address)
    attachments = []
    for attachment in document.get("attachments") or []:
        try:
            attachments.append(
                (
                    str(attachment["name"]),
                    str(attachment["contentType"]),
                    base64.b64decode(attachment["contentInBase64"], validate=True),
                )
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"An attachment is invalid: {error}.") from error
    return SentEmail(
        operation_id="",
        request_id=request_id,
        sender=sender,
        to=tuple(to),
        subject=content["subject"],
        plain_text=str(content.get("plainText") or ""),
        html=str(content.get("html") or ""),
        headers={str(k): str(v) for k, v in (document.get("headers") or {}).items()},
        attachments=tuple(attachments),
    )
