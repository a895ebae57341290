"""What the e-mail adapters share: the reasons their failures are dead-lettered with, the
customer's address checked as a mailbox, and text made safe to send."""

from __future__ import annotations

from ..domain.errors import InvalidInput, PermanentTaskError
from ..domain.mailboxes import Mailbox, parse_mailbox

UNAVAILABLE = "EmailServerUnavailable"
REJECTED = "EmailRejected"


def customer_mailbox(address: str) -> Mailbox:
    """The mailbox ``address`` names, or a ``PermanentTaskError`` saying what to correct."""
    try:
        return parse_mailbox(address, field="customer_email")
    except InvalidInput as error:
        raise PermanentTaskError(
            REJECTED,
            f"The e-mail cannot be sent to {address!r}: the address {error.problem}. Correct "
            "the customer's e-mail address and send the receipt again.",
        ) from error


def scalar_values(text: str) -> str:
    """``text`` with each lone surrogate (not a character, and not encodable in any UTF)
    replaced by U+FFFD, as a decoder would."""
    return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
