"""CorrelationFilter: exact matches on system and user properties, all of which must hold."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .properties import Getter, RuleMessage, system_getter, user_getter
from .values import equals


def compile_correlation_filter(
    *,
    correlation_id: str | None = None,
    message_id: str | None = None,
    to: str | None = None,
    reply_to: str | None = None,
    subject: str | None = None,
    session_id: str | None = None,
    reply_to_session_id: str | None = None,
    content_type: str | None = None,
    properties: Mapping[str, Any] | None = None,
) -> Callable[[RuleMessage], bool]:
    """A function telling whether a message matches the correlation filter.

    Each field given (not None) must equal the message's value, and each entry of `properties`
    must be a user property of the message with an equal value. Strings compare exactly,
    case-sensitively. The docs define a correlation filter as the SQL filter
    `sys.CorrelationId = '...' AND ... AND name = value`, so values follow the SQL filter's `=`:
    a number equals a number of the same value (2 = 2.0), never a string ("2" does not match 2),
    and user property names are found case-insensitively. A filter with no fields matches every
    message.
    """
    system = {
        "CorrelationId": correlation_id,
        "MessageId": message_id,
        "To": to,
        "ReplyTo": reply_to,
        "Label": subject,
        "SessionId": session_id,
        "ReplyToSessionId": reply_to_session_id,
        "ContentType": content_type,
    }
    conditions: list[tuple[Getter, Any]] = [
        (system_getter(name), value) for name, value in system.items() if value is not None
    ]
    conditions += [(user_getter(name), value) for name, value in (properties or {}).items()]

    def matches(message: RuleMessage) -> bool:
        return all(equals(read(message), value) is True for read, value in conditions)

    return matches
