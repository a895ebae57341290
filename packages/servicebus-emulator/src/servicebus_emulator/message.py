"""A stored message: the bare message byte for byte, the header and annotations the broker owns.

Service Bus rewrites only the header and the message annotations of a message it delivers; the
properties, application properties, body and footer reach the receiver exactly as the sender
encoded them. So a message is split into its sections once, on arrival, and kept as bytes.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any

from .codec import Int, Symbol, decode, decode_all, encode, skip
from .sections import (
    APPLICATION_PROPERTIES,
    DELIVERY_ANNOTATIONS,
    HEADER,
    MESSAGE_ANNOTATIONS,
    PROPERTIES,
    InvalidMessage,
    list_items,
    list_section,
    map_section,
    pair,
    raw_map_items,
    sections,
    with_map_items,
)

# Annotations only the broker sets: whatever a sender put there is dropped.
BROKER_ANNOTATIONS = frozenset(
    {
        "x-opt-sequence-number",
        "x-opt-enqueued-time",
        "x-opt-locked-until",
        "x-opt-message-state",
        "x-opt-enqueue-sequence-number",
        "x-opt-lock-token",
        "x-opt-deadletter-source",
        "x-opt-scheduled-enqueue-time",
    }
)

ACTIVE, DEFERRED, SCHEDULED = 0, 1, 2


@dataclass(slots=True)
class Message:
    """One message in an entity (a queue or its dead-letter sub-queue)."""

    sequence_number: int
    message_id: str | None
    session_id: str | None
    enqueued_at: int  # ms
    ttl_ms: int | None  # from the sender's header; None means the queue's default
    expires_at: int | None
    annotations: list[tuple[Any, bytes]]  # the sender's own message annotations
    properties: bytes  # encoded sections, byte for byte
    application_properties: bytes
    body: bytes  # body sections and footer
    header: list[Any] = field(default_factory=list)
    state: int = ACTIVE
    scheduled_at: int | None = None
    delivery_count: int = 0
    dead_lettered: bool = False
    # volatile: locks do not survive a restart
    lock_token: uuid.UUID | None = None
    locked_until: int = 0
    lock_owner: Any = None
    # encodings cached for delivery (the bare message never changes but for dead-lettering)
    bare: bytes | None = None
    header_prefix: bytes | None = None

    @property
    def size(self) -> int:
        return len(self.properties) + len(self.application_properties) + len(self.body)

    def as_incoming(self) -> Incoming:
        """The message as if sent again (forwarded, or fanned out when its schedule is due)."""
        return Incoming(
            self.message_id,
            self.session_id,
            self.ttl_ms,
            self.scheduled_at,
            list(self.header),
            list(self.annotations),
            self.properties,
            self.application_properties,
            self.body,
        )

    def set_properties(self, values: dict[str, Any], removed: Iterable[str] = ()) -> None:
        """Set application properties and remove others (a settlement's properties to modify,
        a dead letter's reason and description); the rest keep their bytes."""
        self.application_properties = with_map_items(
            self.application_properties, APPLICATION_PROPERTIES, values, removed
        )
        self.bare = None

    def encode(self, *, locked_until: int | None, lock_token: uuid.UUID | None = None) -> bytes:
        """The message as a receiver gets it: fresh header and annotations, the bare message.

        Hand-packed: this runs once per delivery, the emulator's hottest path.
        """
        if self.bare is None:
            self.bare = self.properties + self.application_properties + self.body
        if self.header_prefix is None:
            durable, priority, _ttl, first_acquirer = (self.header + [None] * 4)[:4]
            self.header_prefix = b"".join(
                (
                    _BOOL.get(durable, b"\x40") if isinstance(durable, bool) else b"\x40",
                    b"\x50" + bytes((priority,))
                    if isinstance(priority, int) and 0 <= priority < 256
                    else b"\x40",
                    b"\x70" + _U32.pack(self.ttl_ms)
                    if self.ttl_ms is not None and 0 < self.ttl_ms < 2**32
                    else b"\x40",
                    _BOOL.get(first_acquirer, b"\x40")
                    if isinstance(first_acquirer, bool)
                    else b"\x40",
                )
            )
        fields = self.header_prefix + b"\x70" + _U32.pack(self.delivery_count)
        header = b"\x00\x53\x70\xc0" + bytes((len(fields) + 1, 5)) + fields
        items = [raw for _, raw in self.annotations]
        items.append(_SEQUENCE + _I64.pack(self.sequence_number))
        items.append(_ENQUEUED + _I64.pack(self.enqueued_at))
        items.append(_ENQUEUE_SEQUENCE + _I64.pack(self.sequence_number))
        if self.state != ACTIVE:
            items.append(pair(Symbol("x-opt-message-state"), Int(self.state)))
        if self.scheduled_at is not None:
            items.append(_SCHEDULED + _I64.pack(self.scheduled_at))
        if locked_until is not None:
            items.append(_LOCKED_UNTIL + _I64.pack(locked_until))
        if lock_token is not None:
            items.append(pair(Symbol("x-opt-lock-token"), lock_token))
        return b"".join((header, map_section(MESSAGE_ANNOTATIONS, items), self.bare))


_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_BOOL = {True: b"\x41", False: b"\x42"}
# encoded symbol key + the format code of its value: long (0x81) or timestamp (0x83)
_SEQUENCE = encode(Symbol("x-opt-sequence-number")) + b"\x81"
_ENQUEUED = encode(Symbol("x-opt-enqueued-time")) + b"\x83"
_ENQUEUE_SEQUENCE = encode(Symbol("x-opt-enqueue-sequence-number")) + b"\x81"
_SCHEDULED = encode(Symbol("x-opt-scheduled-enqueue-time")) + b"\x83"
_LOCKED_UNTIL = encode(Symbol("x-opt-locked-until")) + b"\x83"


@dataclass(slots=True)
class Incoming:
    """What a sender's encoded message says, before the broker gives it a sequence number."""

    message_id: str | None
    session_id: str | None
    ttl_ms: int | None
    scheduled_at: int | None
    header: list[Any]
    annotations: list[tuple[Any, bytes]]
    properties: bytes
    application_properties: bytes
    body: bytes

    def stored(
        self, sequence_number: int, enqueued_at: int, expires_at: int | None, state: int
    ) -> Message:
        """The message as an entity keeps it, once it has a sequence number: what the sender
        sent, and what the broker adds."""
        return Message(
            **{sent.name: getattr(self, sent.name) for sent in fields(self)},
            sequence_number=sequence_number,
            enqueued_at=enqueued_at,
            expires_at=expires_at,
            state=state,
        )

    def assign_message_id(self, message_id: str) -> None:
        """Service Bus gives a message sent without a message id one of its own, written into
        its properties section (a new one when the message has none)."""
        items = list_items(self.properties) if self.properties else []
        self.properties = list_section(PROPERTIES, [encode(message_id), *items[1:]])
        self.message_id = message_id


def parse(payload: bytes) -> Incoming:
    header: list[Any] = []
    annotations: list[tuple[Any, bytes]] = []
    scheduled_at = None
    properties = application_properties = b""
    body = bytearray()
    message_id = session_id = None
    for code, start, end in sections(payload):
        raw = payload[start:end]
        if code == HEADER:
            value = decode_all(raw).value
            header = value if isinstance(value, list) else []
        elif code == MESSAGE_ANNOTATIONS:
            for key, item in raw_map_items(raw):
                if key == "x-opt-scheduled-enqueue-time":
                    when, _ = decode(item, skip(item, 0))
                    scheduled_at = int(when) if isinstance(when, int) else None
                elif key not in BROKER_ANNOTATIONS:
                    annotations.append((key, item))
        elif code == PROPERTIES:
            properties = raw
            fields = decode_all(raw).value
            if fields is None:
                fields = []
            if not isinstance(fields, list):
                raise InvalidMessage("the properties section does not hold a list")
            fields = fields + [None] * (13 - len(fields))
            message_id = None if fields[0] is None else str(fields[0])
            session_id = fields[10] if isinstance(fields[10], str) else None
        elif code == APPLICATION_PROPERTIES:
            application_properties = raw
        elif code == DELIVERY_ANNOTATIONS:
            continue  # hop-by-hop: never stored
        else:
            body += raw
    ttl = header[2] if len(header) > 2 and isinstance(header[2], int) and header[2] > 0 else None
    return Incoming(
        message_id,
        session_id,
        ttl,
        scheduled_at,
        header,
        annotations,
        properties,
        application_properties,
        bytes(body),
    )
