"""AMQP 1.0 framing: performative codes, frame and performative encoders (the hot ones
hand-packed), and the small helpers every layer shares.

The SDK is strict about exact wire types and field positions; the comments name the places
where they are easy to get wrong.
"""

from __future__ import annotations

import struct
from typing import Any

from .codec import Described, Symbol, ULong, decode, encode

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_HEADER = b"AMQP\x03\x01\x00\x00"
MAX_FRAME_SIZE = 65536
BATCH_FORMAT = 0x80013700
SESSION_WINDOW = 65536
LINK_CREDIT = 10000
PRE_OPEN_FRAME_LIMIT = 64 * 1024
DOTNET_EPOCH_TICKS = 621355968000000000

OPEN, BEGIN, ATTACH, FLOW, TRANSFER, DISPOSITION, DETACH, END, CLOSE = range(0x10, 0x19)
SOURCE, TARGET, ERROR = 0x28, 0x29, 0x1D
RECEIVED, ACCEPTED, REJECTED, RELEASED, MODIFIED = 0x23, 0x24, 0x25, 0x26, 0x27
SASL_MECHANISMS, SASL_INIT, SASL_OUTCOME = 0x40, 0x41, 0x44
SESSION_FILTER = "com.microsoft:session-filter"


class ProtocolError(Exception):
    def __init__(self, condition: str, description: str) -> None:
        super().__init__(description)
        self.condition = condition
        self.description = description


def error(condition: str, description: str | None = None) -> Described:
    return Described(ULong(ERROR), [Symbol(condition), description, None])  # the SDK reads [2]


def performative(code: int, fields: list[Any]) -> bytes:
    while fields and fields[-1] is None:
        fields.pop()
    return encode(Described(ULong(code), fields))


def frame(channel: int, body: bytes, kind: int = 0) -> bytes:
    return FRAME_HEADER.pack(8 + len(body), 2, kind, channel) + body


FRAME_HEADER = struct.Struct(">IBBH")
_TRANSFER_FIELDS = struct.Struct(">BIBIB")
_ECHOES: dict[Any, bytes] = {}


def transfer_performative(
    handle: int, delivery_id: int, tag: bytes, settled: bool, more: bool
) -> bytes:
    """transfer(handle, delivery-id, delivery-tag, message-format 0, settled, more), hand-packed:
    it is written once per delivered message."""
    fields = (
        _TRANSFER_FIELDS.pack(0x70, handle, 0x70, delivery_id, 0xA0)
        + bytes((len(tag),))
        + tag
        + b"\x43"
        + (b"\x41" if settled else b"\x42")
        + (b"\x41" if more else b"\x42")
    )
    return b"\x00\x53\x14\xc0" + bytes((len(fields) + 1, 6)) + fields


def settled_disposition(delivery_id: int, outcome: Described) -> bytes:
    """disposition(role sender, first = last = delivery_id, settled, outcome), hand-packed."""
    state = _ECHOES.get(outcome.descriptor) if outcome.value == [] else None
    if state is None:
        state = encode(outcome)
        if outcome.value == []:
            _ECHOES[outcome.descriptor] = state
    ids = _U32.pack(delivery_id)
    fields = b"\x42\x70" + ids + b"\x70" + ids + b"\x41" + state
    return b"\x00\x53\x15\xc0" + bytes((len(fields) + 1, 5)) + fields


_U32 = struct.Struct(">I")
_SMALL_UINT = {0x43: 0, 0x40: None}


def disposition_fields(body: memoryview) -> list[Any] | None:
    """role, first, last, settled, state of a list8 disposition, or None to decode it fully."""
    if len(body) < 7 or body[3] != 0xC0 or body[4] + 5 != len(body):
        return None
    fields: list[Any] = []
    pos = 6
    for index in range(min(body[5], 4)):
        code = body[pos]
        if index in (0, 3) and code in (0x41, 0x42, 0x40):
            fields.append(None if code == 0x40 else code == 0x41)
            pos += 1
        elif index in (1, 2) and code == 0x52:
            fields.append(body[pos + 1])
            pos += 2
        elif index in (1, 2) and code == 0x70:
            fields.append(_U32.unpack_from(body, pos + 1)[0])
            pos += 5
        elif index in (1, 2) and code in _SMALL_UINT:
            fields.append(_SMALL_UINT[code])
            pos += 1
        else:
            return None
    state = None
    if body[5] >= 5:
        state, pos = decode(body, pos)
    return [*fields, state] + [None] * 9


def field_list(value: Any, size: int) -> list[Any]:
    items = value.value if isinstance(value, Described) else value
    if not isinstance(items, list):
        raise ProtocolError("amqp:decode-error", "a performative's fields must be a list")
    return items + [None] * (size - len(items)) if len(items) < size else items


def entity_path(address: str | None) -> str:
    """``amqps://host:port/queue/$DeadLetterQueue`` or ``queue/$management`` -> the path."""
    if not address:
        return ""
    if "://" in address:
        address = address.split("://", 1)[1]
        address = address.split("/", 1)[1] if "/" in address else ""
    return address.strip("/")


def dotnet_ticks(ms: int) -> int:
    return ms * 10_000 + DOTNET_EPOCH_TICKS


def trim(fields: list[Any]) -> list[Any]:
    while fields and fields[-1] is None:
        fields.pop()
    return fields
