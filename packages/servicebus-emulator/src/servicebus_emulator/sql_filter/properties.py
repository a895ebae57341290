"""The message a rule reads and writes, and how a property name in an expression finds its value.

System properties are the broker properties Service Bus documents for `sys.<Name>` (the names of
the BrokeredMessage class, case-insensitive; `Subject` is the newer SDKs' name for `Label`).
User (application) properties are looked up by name case-insensitively, as the SqlFilter docs
say property names are; an exact match wins over one that differs only in case.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any, Protocol


class RuleMessage(Protocol):
    """What a filter reads and an action writes.

    `system_property(name)` gets one of the canonical names in SYSTEM_PROPERTIES and returns its
    value, or None when the message has none. Values: str for the identifiers and addresses,
    int for DeliveryCount, SequenceNumber, EnqueuedSequenceNumber and Size, an aware UTC
    `datetime` for the *Utc instants, `timedelta` for TimeToLive.

    `application_properties` is the message's own mapping: an action changes it in place.

    `set_system_property(name, value)` gets one of WRITABLE_SYSTEM_PROPERTIES and a value of
    that property's type, or None to clear it.
    """

    @property
    def application_properties(self) -> MutableMapping[str, Any]: ...

    def system_property(self, name: str) -> Any: ...

    def set_system_property(self, name: str, value: Any) -> None: ...


Getter = Callable[[RuleMessage], Any]

# The broker properties of a Service Bus message, by their documented (BrokeredMessage) names.
SYSTEM_PROPERTIES: tuple[str, ...] = (
    "ContentType",
    "CorrelationId",
    "DeadLetterSource",
    "DeliveryCount",
    "EnqueuedSequenceNumber",
    "EnqueuedTimeUtc",
    "ExpiresAtUtc",
    "ForcePersistence",
    "Label",
    "LockedUntilUtc",
    "LockToken",
    "MessageId",
    "PartitionKey",
    "ReplyTo",
    "ReplyToSessionId",
    "ScheduledEnqueueTimeUtc",
    "SequenceNumber",
    "SessionId",
    "Size",
    "State",
    "TimeToLive",
    "To",
    "ViaPartitionKey",
)

# What an action may set, and the type each one takes: "str", "datetime" or "timedelta".
WRITABLE_SYSTEM_PROPERTIES: dict[str, str] = {
    "ContentType": "str",
    "CorrelationId": "str",
    "Label": "str",
    "MessageId": "str",
    "PartitionKey": "str",
    "ReplyTo": "str",
    "ReplyToSessionId": "str",
    "ScheduledEnqueueTimeUtc": "datetime",
    "SessionId": "str",
    "TimeToLive": "timedelta",
    "To": "str",
}

# The ones the docs call read-only (the broker sets them).
READ_ONLY_SYSTEM_PROPERTIES = frozenset(
    {
        "DeadLetterSource",
        "DeliveryCount",
        "EnqueuedSequenceNumber",
        "EnqueuedTimeUtc",
        "ExpiresAtUtc",
        "LockedUntilUtc",
        "LockToken",
        "SequenceNumber",
        "Size",
        "State",
    }
)

_CANONICAL = {name.casefold(): name for name in SYSTEM_PROPERTIES} | {"subject": "Label"}
_ABSENT = object()


def system_property_name(name: str) -> str | None:
    """The canonical name of a system property written in any case, or None if there is none."""
    return _CANONICAL.get(name.casefold())


def find_key(properties: MutableMapping[str, Any], name: str) -> str | None:
    """The key of `properties` that `name` refers to: itself, else one equal but for case."""
    if name in properties:
        return name
    folded = name.casefold()
    for key in properties:
        if isinstance(key, str) and key.casefold() == folded:
            return key
    return None


def system_getter(name: str) -> Getter:
    def get(message: RuleMessage) -> Any:
        return message.system_property(name)

    return get


def user_getter(name: str) -> Getter:
    """Reads a user property; None when it is missing (SQL's unknown) or null."""
    folded = name.casefold()

    def get(message: RuleMessage) -> Any:
        properties = message.application_properties
        value = properties.get(name, _ABSENT)
        if value is not _ABSENT:
            return value
        for key, value in properties.items():
            if isinstance(key, str) and key.casefold() == folded:
                return value
        return None

    return get


def user_exists(name: str) -> Callable[[RuleMessage], bool]:
    def exists(message: RuleMessage) -> bool:
        return find_key(message.application_properties, name) is not None

    return exists
