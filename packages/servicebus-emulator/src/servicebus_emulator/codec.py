"""The AMQP 1.0 type system (part 1 of the spec): a typed encoder and a bounds-checked decoder.

Our own codec rather than the SDK's private one: the server must survive hostile bytes (every
read is bounds-checked and raises :class:`DecodeError`), keep the bare message byte for byte
(:func:`skip` finds a value's extent without building it), and choose each wire type itself,
because the SDK is strict about them (``uint`` here, ``symbol`` there, never an empty array).

Decoding yields plain Python values, except where the AMQP type carries meaning a plain value
loses: :class:`Symbol`, :class:`Timestamp` and :class:`Described`. Encoding takes plain values
(``int`` is a ``long``) or the wrappers below to pick a narrower wire type.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

MAX_NESTING = 32
MAX_COUNT = 1 << 20  # elements in one compound value; far above what a 1 MiB frame can hold


class DecodeError(ValueError):
    """Bytes that are not a valid AMQP encoding (or exceed what this server accepts)."""


class Symbol(str):
    __slots__ = ()


class Timestamp(int):
    """Milliseconds since the Unix epoch."""

    __slots__ = ()


class UByte(int):
    __slots__ = ()


class UShort(int):
    __slots__ = ()


class UInt(int):
    __slots__ = ()


class ULong(int):
    __slots__ = ()


class Int(int):
    __slots__ = ()


class Long(int):
    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Described:
    descriptor: Any
    value: Any


@dataclass(frozen=True, slots=True)
class Array:
    """An AMQP array: one element constructor for all items (``code`` is its format code)."""

    code: int
    items: tuple[Any, ...]


# ---------------------------------------------------------------------------- encoding

_B = struct.Struct(">B")
_b = struct.Struct(">b")
_H = struct.Struct(">H")
_h = struct.Struct(">h")
_I = struct.Struct(">I")
_i = struct.Struct(">i")
_Q = struct.Struct(">Q")
_q = struct.Struct(">q")
_f = struct.Struct(">f")
_d = struct.Struct(">d")


def encode(value: Any) -> bytes:
    out = bytearray()
    write(out, value)
    return bytes(out)


def write(out: bytearray, value: Any) -> None:
    writer = _WRITERS.get(type(value))
    if writer is not None:
        writer(out, value)
    else:
        _write_any(out, value)


def _write_any(out: bytearray, value: Any) -> None:
    if value is None:
        out.append(0x40)
    elif value is True:
        out.append(0x41)
    elif value is False:
        out.append(0x42)
    elif isinstance(value, Symbol):
        raw = value.encode("ascii")
        _write_variable(out, raw, 0xA3, 0xB3)
    elif isinstance(value, str):
        _write_variable(out, value.encode("utf-8"), 0xA1, 0xB1)
    elif isinstance(value, bytes | bytearray | memoryview):
        _write_variable(out, bytes(value), 0xA0, 0xB0)
    elif isinstance(value, int):
        _write_int(out, value)
    elif isinstance(value, float):
        out.append(0x82)
        out += _d.pack(value)
    elif isinstance(value, uuid.UUID):
        out.append(0x98)
        out += value.bytes
    elif isinstance(value, Described):
        out.append(0x00)
        write(out, value.descriptor)
        write(out, value.value)
    elif isinstance(value, dict):
        _write_map(out, value)
    elif isinstance(value, list | tuple):
        _write_list(out, value)
    elif isinstance(value, Array):
        _write_array(out, value)
    else:
        raise TypeError(f"cannot encode {type(value).__name__} as AMQP")


def _write_str(out: bytearray, value: str) -> None:
    _write_variable(out, value.encode("utf-8"), 0xA1, 0xB1)


def _write_symbol(out: bytearray, value: str) -> None:
    _write_variable(out, value.encode("ascii"), 0xA3, 0xB3)


def _write_bytes(out: bytearray, value: bytes) -> None:
    _write_variable(out, value, 0xA0, 0xB0)


def _write_described(out: bytearray, value: Described) -> None:
    out.append(0x00)
    write(out, value.descriptor)
    write(out, value.value)


def _write_variable(out: bytearray, raw: bytes, small: int, large: int) -> None:
    if len(raw) < 256:
        out.append(small)
        out.append(len(raw))
    else:
        out.append(large)
        out += _I.pack(len(raw))
    out += raw


def _write_int(out: bytearray, value: int) -> None:
    kind = type(value)
    if kind is ULong:
        if value == 0:
            out.append(0x44)
        elif value < 256:
            out += bytes((0x53, value))
        else:
            out.append(0x80)
            out += _Q.pack(value)
    elif kind is UInt:
        if value == 0:
            out.append(0x43)
        elif value < 256:
            out += bytes((0x52, value))
        else:
            out.append(0x70)
            out += _I.pack(value)
    elif kind is UShort:
        out.append(0x60)
        out += _H.pack(value)
    elif kind is UByte:
        out += bytes((0x50, value))
    elif kind is Int:
        if -128 <= value <= 127:
            out.append(0x54)
            out += _b.pack(value)
        else:
            out.append(0x71)
            out += _i.pack(value)
    elif kind is Timestamp:
        out.append(0x83)
        out += _q.pack(value)
    elif -128 <= value <= 127:  # long
        out.append(0x55)
        out += _b.pack(value)
    else:
        out.append(0x81)
        out += _q.pack(value)


def _write_list(out: bytearray, items: Iterable[Any]) -> None:
    body = bytearray()
    count = 0
    for item in items:
        write(body, item)
        count += 1
    if count == 0:
        out.append(0x45)
    elif len(body) + 1 < 256 and count < 256:
        out += bytes((0xC0, len(body) + 1, count))
        out += body
    else:
        out.append(0xD0)
        out += _I.pack(len(body) + 4)
        out += _I.pack(count)
        out += body


def _write_map(out: bytearray, mapping: dict[Any, Any]) -> None:
    body = bytearray()
    for key, item in mapping.items():
        write(body, key)
        write(body, item)
    write_map_body(out, body, 2 * len(mapping))


def write_map_body(out: bytearray, body: bytes | bytearray, count: int) -> None:
    """A map from its already-encoded key/value items (``count`` = keys + values)."""
    if len(body) + 1 < 256 and count < 256:
        out += bytes((0xC1, len(body) + 1, count))
    else:
        out.append(0xD1)
        out += _I.pack(len(body) + 4)
        out += _I.pack(count)
    out += body


_WRITERS: dict[type, Callable[[bytearray, Any], None]] = {
    type(None): lambda out, value: out.append(0x40),
    bool: lambda out, value: out.append(0x41 if value else 0x42),
    str: _write_str,
    Symbol: _write_symbol,
    bytes: _write_bytes,
    int: lambda out, value: _write_int(out, value),
    UInt: lambda out, value: _write_int(out, value),
    ULong: lambda out, value: _write_int(out, value),
    UByte: lambda out, value: _write_int(out, value),
    UShort: lambda out, value: _write_int(out, value),
    Int: lambda out, value: _write_int(out, value),
    Long: lambda out, value: _write_int(out, value),
    Timestamp: lambda out, value: _write_int(out, value),
    Described: _write_described,
    list: lambda out, value: _write_list(out, value),
    dict: lambda out, value: _write_map(out, value),
}

_ARRAY_WRITERS = {
    0x98: lambda out, v: out.__iadd__(v.bytes),
    0x81: lambda out, v: out.__iadd__(_q.pack(v)),
    0x83: lambda out, v: out.__iadd__(_q.pack(v)),
    0x71: lambda out, v: out.__iadd__(_i.pack(v)),
    0x70: lambda out, v: out.__iadd__(_I.pack(v)),
}


def _write_array(out: bytearray, array: Array) -> None:
    if not array.items:  # the SDK's decoder mishandles empty arrays: send an empty list
        out.append(0x45)
        return
    body = bytearray()
    if array.code in (0xB1, 0xB3):
        for item in array.items:
            raw = item.encode("utf-8" if array.code == 0xB1 else "ascii")
            body += _I.pack(len(raw))
            body += raw
    else:
        writer = _ARRAY_WRITERS[array.code]
        for item in array.items:
            writer(body, item)
    out.append(0xF0)
    out += _I.pack(len(body) + 5)
    out += _I.pack(len(array.items))
    out.append(array.code)
    out += body


# ---------------------------------------------------------------------------- decoding

_FIXED = {  # format code -> width of the fixed-size value
    0x40: 0, 0x41: 0, 0x42: 0, 0x43: 0, 0x44: 0, 0x45: 0,
    0x50: 1, 0x51: 1, 0x52: 1, 0x53: 1, 0x54: 1, 0x55: 1, 0x56: 1,
    0x60: 2, 0x61: 2,
    0x70: 4, 0x71: 4, 0x72: 4, 0x73: 4, 0x74: 4,
    0x80: 8, 0x81: 8, 0x82: 8, 0x83: 8, 0x84: 8,
    0x94: 16, 0x98: 16,
}  # fmt: skip


def _need(buf: bytes | memoryview, pos: int, size: int) -> None:
    if size < 0 or pos + size > len(buf):
        raise DecodeError(f"truncated AMQP value at offset {pos}")


def skip(buf: bytes | memoryview, pos: int, depth: int = 0) -> int:
    """The offset just past the value (or described value) that starts at ``pos``."""
    if depth > MAX_NESTING:
        raise DecodeError("AMQP value nested too deeply")
    _need(buf, pos, 1)
    code = buf[pos]
    pos += 1
    if code == 0x00:
        pos = skip(buf, pos, depth + 1)
        return skip(buf, pos, depth + 1)
    width = _FIXED.get(code)
    if width is not None:
        _need(buf, pos, width)
        return pos + width
    if code in (0xA0, 0xA1, 0xA3, 0xC0, 0xC1, 0xE0):
        _need(buf, pos, 1)
        size = buf[pos]
        _need(buf, pos + 1, size)
        return pos + 1 + size
    if code in (0xB0, 0xB1, 0xB3, 0xD0, 0xD1, 0xF0):
        _need(buf, pos, 4)
        (size,) = _I.unpack_from(buf, pos)
        _need(buf, pos + 4, size)
        return pos + 4 + size
    raise DecodeError(f"unknown AMQP format code 0x{code:02x} at offset {pos - 1}")


def decode(buf: bytes | memoryview, pos: int = 0) -> tuple[Any, int]:
    """The value that starts at ``pos`` and the offset just past it."""
    return _decode(buf, pos, 0)


def decode_all(buf: bytes | memoryview) -> Any:
    value, end = _decode(buf, 0, 0)
    if end != len(buf):
        raise DecodeError(f"{len(buf) - end} trailing bytes after an AMQP value")
    return value


def _decode(buf: bytes | memoryview, pos: int, depth: int) -> tuple[Any, int]:
    if depth > MAX_NESTING:
        raise DecodeError("AMQP value nested too deeply")
    if pos >= len(buf):
        raise DecodeError(f"truncated AMQP value at offset {pos}")
    code = buf[pos]
    if code == 0x00:
        descriptor, pos = _decode(buf, pos + 1, depth + 1)
        value, pos = _decode(buf, pos, depth + 1)
        return Described(descriptor, value), pos
    reader = _READERS.get(code)
    if reader is None:
        raise DecodeError(f"unknown AMQP format code 0x{code:02x} at offset {pos}")
    return reader(buf, pos + 1, depth)


_Reader = Callable[[bytes | memoryview, int, int], tuple[Any, int]]


def _constant(value: Any) -> _Reader:
    def read(buf: bytes | memoryview, pos: int, depth: int) -> tuple[Any, int]:
        return value, pos

    return read


def _packed(layout: struct.Struct, wrap: Callable[[Any], Any] | None = None) -> _Reader:
    size, unpack = layout.size, layout.unpack_from

    def read(buf: bytes | memoryview, pos: int, depth: int) -> tuple[Any, int]:
        if pos + size > len(buf):
            raise DecodeError(f"truncated AMQP value at offset {pos}")
        value = unpack(buf, pos)[0]
        return (wrap(value) if wrap else value), pos + size

    return read


def _raw(size: int, wrap: Callable[[bytes], Any]) -> _Reader:
    def read(buf: bytes | memoryview, pos: int, depth: int) -> tuple[Any, int]:
        if pos + size > len(buf):
            raise DecodeError(f"truncated AMQP value at offset {pos}")
        return wrap(bytes(buf[pos : pos + size])), pos + size

    return read


def _variable(width: int, kind: str) -> _Reader:
    def read(buf: bytes | memoryview, pos: int, depth: int) -> tuple[Any, int]:
        if pos + width > len(buf):
            raise DecodeError(f"truncated AMQP value at offset {pos}")
        size = buf[pos] if width == 1 else _I.unpack_from(buf, pos)[0]
        pos += width
        end = pos + size
        if end > len(buf):
            raise DecodeError(f"truncated AMQP value at offset {pos}")
        raw = bytes(buf[pos:end])
        if kind == "binary":
            return raw, end
        try:
            if kind == "string":
                return raw.decode("utf-8"), end
            return Symbol(raw.decode("ascii")), end
        except UnicodeDecodeError as error:
            raise DecodeError(f"invalid string encoding: {error}") from None

    return read


def _compound(width: int, kind: int) -> _Reader:
    def read(buf: bytes | memoryview, pos: int, depth: int) -> tuple[Any, int]:
        if pos + 2 * width > len(buf):
            raise DecodeError(f"truncated AMQP value at offset {pos}")
        if width == 1:
            size, count = buf[pos], buf[pos + 1]
        else:
            size, count = _I.unpack_from(buf, pos)[0], _I.unpack_from(buf, pos + 4)[0]
            if size < 4:
                raise DecodeError("compound size smaller than its count")
        return _decode_compound(buf, pos + 2 * width, pos + width + size, count, kind, depth)

    return read


def _char(value: int) -> str:
    return chr(value & 0x10FFFF) if value < 0x110000 else "\ufffd"


_READERS: dict[int, _Reader] = {
    0x40: _constant(None),
    0x41: _constant(True),
    0x42: _constant(False),
    0x43: _constant(0),
    0x44: _constant(0),
    0x56: _packed(_B, bool),
    0x50: _packed(_B),
    0x52: _packed(_B),
    0x53: _packed(_B),
    0x51: _packed(_b),
    0x54: _packed(_b),
    0x55: _packed(_b),
    0x60: _packed(_H),
    0x61: _packed(_h),
    0x70: _packed(_I),
    0x71: _packed(_i),
    0x72: _packed(_f),
    0x73: _packed(_I, _char),
    0x80: _packed(_Q),
    0x81: _packed(_q),
    0x82: _packed(_d),
    0x83: _packed(_q, Timestamp),
    0x98: _raw(16, lambda raw: uuid.UUID(bytes=raw)),
    0x74: _raw(4, bytes),  # decimals: kept raw, never interpreted
    0x84: _raw(8, bytes),
    0x94: _raw(16, bytes),
    0xA0: _variable(1, "binary"),
    0xB0: _variable(4, "binary"),
    0xA1: _variable(1, "string"),
    0xB1: _variable(4, "string"),
    0xA3: _variable(1, "symbol"),
    0xB3: _variable(4, "symbol"),
    0xC0: _compound(1, 0xD0),
    0xD0: _compound(4, 0xD0),
    0xC1: _compound(1, 0xD1),
    0xD1: _compound(4, 0xD1),
    0xE0: _compound(1, 0xF0),
    0xF0: _compound(4, 0xF0),
}
_READERS[0x45] = lambda buf, pos, depth: ([], pos)  # list0: a fresh list each time


def _decode_compound(
    buf: bytes | memoryview, pos: int, end: int, count: int, kind: int, depth: int
) -> tuple[Any, int]:
    if end > len(buf):
        raise DecodeError(f"truncated AMQP value at offset {pos}")
    if count > MAX_COUNT or count > (end - pos) + 1:
        raise DecodeError(f"compound count {count} does not fit its {end - pos} bytes")
    if kind == 0xD0:  # list
        items = []
        for _ in range(count):
            item, pos = _decode(buf, pos, depth + 1)
            items.append(item)
    elif kind == 0xD1:  # map
        if count % 2:
            raise DecodeError("map with an odd number of elements")
        mapping: dict[Any, Any] = {}
        for _ in range(count // 2):
            key, pos = _decode(buf, pos, depth + 1)
            value, pos = _decode(buf, pos, depth + 1)
            try:
                mapping[key] = value
            except TypeError:
                raise DecodeError("unhashable map key") from None
        pos_check(pos, end)
        return mapping, end
    else:  # array: one constructor, then the bare values
        if pos >= end:
            raise DecodeError("an array without its element constructor")
        constructor = buf[pos]
        pos += 1
        descriptor = None
        if constructor == 0x00:
            descriptor, pos = _decode(buf, pos, depth + 1)
            if pos >= len(buf):
                raise DecodeError("an array without its element constructor")
            constructor = buf[pos]
            pos += 1
        reader = _READERS.get(constructor)
        if reader is None:
            raise DecodeError(f"unknown AMQP format code 0x{constructor:02x} in an array")
        items = []
        for _ in range(count):
            item, pos = reader(buf, pos, depth + 1)
            items.append(item if descriptor is None else Described(descriptor, item))
    pos_check(pos, end)
    return items, end


def pos_check(pos: int, end: int) -> None:
    if pos > end:
        raise DecodeError("compound value overruns its declared size")
