"""A message as a subscription rule sees it (the sql_filter module's ``RuleMessage``): its
system properties read from the AMQP properties section and the broker's facts, its
application properties as a dict; and the way an action's changes go back into the bytes.

Only what an action changed is re-encoded: the other properties keep the sender's bytes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import MutableMapping
from datetime import UTC, datetime, timedelta
from typing import Any

from .codec import Symbol, Timestamp, decode, decode_all, encode, skip
from .message import Incoming
from .sections import (
    APPLICATION_PROPERTIES,
    PROPERTIES,
    list_items,
    list_section,
    pair,
    with_map_items,
)

# System properties that live in the AMQP properties section, by their list index.
_FIELDS = {
    "MessageId": 0,
    "To": 2,
    "Label": 3,
    "ReplyTo": 4,
    "CorrelationId": 5,
    "ContentType": 6,
    "SessionId": 10,
    "ReplyToSessionId": 12,
}
_PARTITION_KEY = "x-opt-partition-key"
_VIA_PARTITION_KEY = "x-opt-via-partition-key"


def _instant(ms: int | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, UTC)


def _plain(value: Any) -> Any:
    """A decoded AMQP value as the rules compare it: timestamps as datetimes, symbols as str."""
    if isinstance(value, Timestamp):
        return _instant(int(value))
    if isinstance(value, Symbol):
        return str(value)
    return value


def _wire(value: Any) -> Any:
    """A rule's value as the message carries it (the inverse of :func:`_plain`)."""
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return Timestamp(int(moment.timestamp() * 1000))
    if isinstance(value, timedelta):
        return int(value.total_seconds() * 1000)  # no AMQP duration type: milliseconds
    return value


class RuleView:
    """One copy of a message sent to a topic, as its subscription's rules read and change it."""

    def __init__(self, incoming: Incoming, *, sequence_number: int, enqueued_at: int, size: int):
        self.incoming = dataclasses.replace(
            incoming, header=list(incoming.header), annotations=list(incoming.annotations)
        )
        self.sequence_number = sequence_number
        self.enqueued_at = enqueued_at
        self.size = size
        self._fields: list[Any] = []
        if incoming.properties:
            value = decode_all(incoming.properties).value
            self._fields = [_plain(v) for v in value] if isinstance(value, list) else []
        self._changed_fields: dict[int, Any] = {}
        self._original = self._decode_application_properties()
        self._properties: dict[str, Any] = dict(self._original)

    def _decode_application_properties(self) -> dict[str, Any]:
        if not self.incoming.application_properties:
            return {}
        value = decode_all(self.incoming.application_properties).value
        if not isinstance(value, dict):
            return {}
        return {str(k): _plain(v) for k, v in value.items() if isinstance(k, str)}

    # ------------------------------------------------------------ RuleMessage

    @property
    def application_properties(self) -> MutableMapping[str, Any]:
        return self._properties

    def system_property(self, name: str) -> Any:
        index = _FIELDS.get(name)
        if index is not None:
            value = self._changed_fields.get(index, self._field(index))
            return None if value is None else str(value)
        incoming = self.incoming
        ttl = incoming.ttl_ms
        return {
            "SequenceNumber": self.sequence_number,
            "EnqueuedSequenceNumber": self.sequence_number,
            "EnqueuedTimeUtc": _instant(self.enqueued_at),
            "DeliveryCount": 0,
            "Size": self.size,
            "State": "Scheduled" if incoming.scheduled_at else "Active",
            "TimeToLive": None if ttl is None else timedelta(milliseconds=ttl),
            "ExpiresAtUtc": None if ttl is None else _instant(self.enqueued_at + ttl),
            "ScheduledEnqueueTimeUtc": _instant(incoming.scheduled_at),
            "PartitionKey": self._annotation(_PARTITION_KEY),
            "ViaPartitionKey": self._annotation(_VIA_PARTITION_KEY),
        }.get(name)

    def set_system_property(self, name: str, value: Any) -> None:
        index = _FIELDS.get(name)
        if index is not None:
            self._changed_fields[index] = value
        elif name == "TimeToLive":
            self.incoming.ttl_ms = None if value is None else int(value.total_seconds() * 1000)
        elif name == "ScheduledEnqueueTimeUtc":
            self.incoming.scheduled_at = _wire(value) if value is not None else None
        elif name == "PartitionKey":
            self.incoming.annotations = [
                (key, raw) for key, raw in self.incoming.annotations if key != _PARTITION_KEY
            ]
            if value is not None:
                self.incoming.annotations.append(
                    (_PARTITION_KEY, pair(Symbol(_PARTITION_KEY), value))
                )

    # ------------------------------------------------------------ back to bytes

    def result(self) -> Incoming:
        """The copy with every change an action made written into its sections."""
        incoming = self.incoming
        if self._changed_fields:
            items = list_items(incoming.properties) if incoming.properties else []
            items += [b"\x40"] * (max(self._changed_fields) + 1 - len(items))
            for index, value in self._changed_fields.items():
                items[index] = encode(Symbol(value) if index == 6 and value is not None else value)
            incoming.properties = list_section(PROPERTIES, items)
            incoming.message_id = self.system_property("MessageId")
            incoming.session_id = self.system_property("SessionId")
        if self._properties != self._original:
            updates = {
                key: _wire(value)
                for key, value in self._properties.items()
                if key not in self._original or self._original[key] != value
            }
            incoming.application_properties = with_map_items(
                incoming.application_properties,
                APPLICATION_PROPERTIES,
                updates,
                removed=[key for key in self._original if key not in self._properties],
            )
        return incoming

    def _field(self, index: int) -> Any:
        return self._fields[index] if index < len(self._fields) else None

    def _annotation(self, key: str) -> Any:
        for name, raw in self.incoming.annotations:
            if name == key:
                return _plain(decode(raw, skip(raw, 0))[0])
        return None
