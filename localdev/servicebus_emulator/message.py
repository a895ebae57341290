"""A stored message: the bare message byte for byte, the header and annotations the broker owns.

Service Bus rewrites only the header and the message annotations of a message it delivers; the
properties, application properties, body and footer reach the receiver exactly as the sender
encoded them. So a message is split into its sections once, on arrival, and kept as bytes.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from typing import Any

from .codec import (
    DecodeError,
    Int,
    Symbol,
    decode,
    decode_all,
    encode,
    skip,
    write,
    write_map_body,
)

HEADER, DELIVERY_ANNOTATIONS, MESSAGE_ANNOTATIONS, PROPERTIES, APPLICATION_PROPERTIES = (
    0x70,
    0x71,
    0x72,
    0x73,
    0x74,
)
DATA, AMQP_SEQUENCE, AMQP_VALUE, FOOTER = 0x75, 0x76, 0x77, 0x78
_SYMBOLIC_SECTIONS = {
    "amqp:header:list": HEADER,
    "amqp:delivery-annotations:map": DELIVERY_ANNOTATIONS,
    "amqp:message-annotations:map": MESSAGE_ANNOTATIONS,
    "amqp:properties:list": PROPERTIES,
    "amqp:application-properties:map": APPLICATION_PROPERTIES,
    "amqp:data:binary": DATA,
    "amqp:amqp-sequence:list": AMQP_SEQUENCE,
    "amqp:amqp-value:*": AMQP_VALUE,
    "amqp:footer:map": FOOTER,
}

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


class InvalidMessage(DecodeError):
    pass


def sections(payload: bytes) -> list[tuple[int, int, int]]:
    """(section code, start, end) of every section in an encoded message, in order."""
    found = []
    pos = 0
    view = memoryview(payload)
    while pos < len(payload):
        if payload[pos] != 0x00:
            raise InvalidMessage("a message section must be a described value")
        descriptor, body = decode(view, pos + 1)
        end = skip(view, body)
        if isinstance(descriptor, str):
            code = _SYMBOLIC_SECTIONS.get(descriptor)
        else:
            code = descriptor if isinstance(descriptor, int) else None
        if code is None or not HEADER <= code <= FOOTER:
            raise InvalidMessage(f"unknown message section {descriptor!r}")
        found.append((code, pos, end))
        pos = end
    return found


def raw_map_items(section: bytes) -> list[tuple[Any, bytes]]:
    """(key, encoded key+value) of a map section, keeping each value's bytes as they came."""
    view = memoryview(section)
    _, pos = decode(view, 1)  # the descriptor
    code = view[pos]
    if code == 0x40:
        return []
    if code == 0xC1:
        count, pos = view[pos + 2], pos + 3
    elif code == 0xD1:
        count, pos = int.from_bytes(view[pos + 5 : pos + 9], "big"), pos + 9
    else:
        raise InvalidMessage("a map section does not hold a map")
    items = []
    for _ in range(count // 2):
        key, after_key = decode(view, pos)
        end = skip(view, after_key)
        items.append((key, bytes(view[pos:end])))
        pos = end
    return items


def map_section(code: int, items: list[bytes]) -> bytes:
    out = bytearray(b"\x00\x53")
    out.append(code)
    write_map_body(out, b"".join(items), 2 * len(items))
    return bytes(out)


def pair(key: Any, value: Any) -> bytes:
    out = bytearray()
    write(out, key)
    write(out, value)
    return bytes(out)


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

    def dead_letter_properties(self, reason: str | None, description: str | None) -> None:
        items = [
            raw
            for key, raw in (
                raw_map_items(self.application_properties) if self.application_properties else []
            )
            if key not in ("DeadLetterReason", "DeadLetterErrorDescription")
        ]
        if reason is not None:
            items.append(pair("DeadLetterReason", reason))
        if description is not None:
            items.append(pair("DeadLetterErrorDescription", description))
        self.application_properties = map_section(APPLICATION_PROPERTIES, items)
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
        message_id=message_id,
        session_id=session_id,
        ttl_ms=ttl,
        scheduled_at=scheduled_at,
        header=header,
        annotations=annotations,
        properties=properties,
        application_properties=application_properties,
        body=bytes(body),
    )
