"""Sending e-mail."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class Attachment:
    filename: str
    content_type: str
    content: bytes


@dataclass(frozen=True)
class Email:
    to: str
    subject: str
    text: str
    message_id: str  # deterministic, so a re-sent copy can be recognised by the recipient
    attachments: tuple[Attachment, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Repeatability:
    """What makes a send repeatable: its request id (a GUID) and when it was first sent."""

    request_id: str
    first_sent: datetime


class EmailSender(Protocol):
    name: str  # "acs", "smtp": what the receipt's record says sent it
    # True: a send repeated with the same ``Repeatability`` within the service's window is
    # carried out once; False: a repeat sends the e-mail again.
    repeatable: bool

    def send(self, email: Email, *, repeat: Repeatability | None = None) -> str:
        """Deliver ``email``, following the send to its end; returns what the send is known
        by (the service's operation id, else the e-mail's Message-ID). Raises a transient or
        permanent task error, or ``MayHaveBeenSent`` when the service no longer knows whether
        a repeat's first attempt was carried out. Without ``repeat`` (or when not
        ``repeatable``), a repeat sends it again (with the same ``message_id``, so the
        recipient can tell)."""
        ...
