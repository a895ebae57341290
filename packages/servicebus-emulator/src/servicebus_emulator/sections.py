"""The sections of an encoded AMQP message, and rewriting one of them while every other value
keeps the bytes it came with (Service Bus hands a message on byte for byte, except where it
must change it: its own annotations, a message id it assigns, properties a settlement modifies).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .codec import DecodeError, decode, skip, write, write_map_body

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
    count, pos = _compound(view, "map", 0xC1, 0xD1)
    items = []
    for _ in range(count // 2):
        key, after_key = decode(view, pos)
        end = skip(view, after_key)
        items.append((key, bytes(view[pos:end])))
        pos = end
    return items


def _compound(view: memoryview, kind: str, small: int, large: int) -> tuple[int, int]:
    """(element count, where the first element starts) of the list or map a section holds."""
    _, pos = decode(view, 1)  # the descriptor
    code = view[pos]
    if code in (0x40, 0x45):  # null, or an empty list
        return 0, pos + 1
    if code == small:
        return view[pos + 2], pos + 3
    if code == large:
        return int.from_bytes(view[pos + 5 : pos + 9], "big"), pos + 9
    raise InvalidMessage(f"a {kind} section does not hold a {kind}")


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


def list_items(section: bytes) -> list[bytes]:
    """The encoded items of a list section, each as it came."""
    view = memoryview(section)
    count, pos = _compound(view, "list", 0xC0, 0xD0)
    items = []
    for _ in range(count):
        end = skip(view, pos)
        items.append(bytes(view[pos:end]))
        pos = end
    return items


def list_section(code: int, items: list[bytes]) -> bytes:
    body = b"".join(items)
    if len(body) + 1 < 256 and len(items) < 256:
        head = bytes((0xC0, len(body) + 1, len(items)))
    else:
        head = b"\xd0" + (len(body) + 4).to_bytes(4, "big") + len(items).to_bytes(4, "big")
    return bytes((0x00, 0x53, code)) + head + body


def with_map_items(
    section: bytes, code: int, updates: dict[str, Any], removed: Iterable[str] = ()
) -> bytes:
    """A map section (or a new one when ``section`` is empty) where each key of ``updates``
    has its new value and the ``removed`` keys are gone; the other items keep their bytes."""
    dropped = set(updates) | set(removed)
    kept = [raw for key, raw in (raw_map_items(section) if section else []) if key not in dropped]
    return map_section(code, kept + [pair(key, value) for key, value in updates.items()])
