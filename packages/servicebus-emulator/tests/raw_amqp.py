"""Just enough hand-made AMQP 1.0 to open a connection on a raw socket, for the protocol fault
tests: the SDK cannot send a malformed frame or ask for an idle timeout."""

from __future__ import annotations

import socket
import struct
from typing import Any

from servicebus_emulator.codec import decode_all

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
OPEN, BEGIN, TRANSFER, CLOSE = 0x10, 0x11, 0x14, 0x18
SASL_INIT, SASL_OUTCOME = 0x41, 0x44


def frame(body: bytes, *, kind: int = 0, channel: int = 0) -> bytes:
    return struct.pack(">IBBH", 8 + len(body), 2, kind, channel) + body


def performative(code: int, *fields: bytes) -> bytes:
    payload = b"".join(fields)
    return bytes([0x00, 0x53, code, 0xC0, len(payload) + 1, len(fields)]) + payload


def symbol(value: str) -> bytes:
    return b"\xa3" + bytes([len(value)]) + value.encode()


def string(value: str) -> bytes:
    return b"\xa1" + bytes([len(value)]) + value.encode()


def uint(value: int) -> bytes:
    return b"\x70" + struct.pack(">I", value)


NULL = b"\x40"


def read_frame(sock: socket.socket) -> tuple[int, int, bytes] | None:
    """(type, channel, body after the header) or None when the peer closed the socket."""
    head = _read_exactly(sock, 8)
    if head is None:
        return None
    size, doff, kind, channel = struct.unpack(">IBBH", head)
    body = _read_exactly(sock, size - 8)
    if body is None:
        return None
    return kind, channel, body[doff * 4 - 8 :]


def _read_exactly(sock: socket.socket, count: int) -> bytes | None:
    data = b""
    while len(data) < count:
        try:
            chunk = sock.recv(count - len(data))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        data += chunk
    return data


def code_of(body: bytes) -> int:
    """The performative code of a frame body (0x00 0x53 <code> ...)."""
    assert body[:2] == b"\x00\x53", body[:8].hex()
    return body[2]


def handshake_until_open(idle_timeout_ms: int | None = None) -> bytes:
    """SASL ANONYMOUS, the AMQP header and an open, pipelined as the SDK sends them."""
    idle = uint(idle_timeout_ms) if idle_timeout_ms is not None else NULL
    return (
        SASL_HEADER
        + frame(performative(SASL_INIT, symbol("ANONYMOUS"), b"\xa0\x00"), kind=1)
        + AMQP_HEADER
        + frame(performative(OPEN, string("raw-probe"), NULL, uint(65536), b"\x60\xff\xff", idle))
    )


def open_connection(host: str, port: int, *, idle_timeout_ms: int | None = None) -> socket.socket:
    """SASL ANONYMOUS, then AMQP open, as the SDK does; returns after the server's open."""
    sock, _ = open_connection_with_fields(host, port, idle_timeout_ms=idle_timeout_ms)
    return sock


def open_connection_with_fields(
    host: str, port: int, *, idle_timeout_ms: int | None = None
) -> tuple[socket.socket, list[Any]]:
    """As :func:`open_connection`; also the fields of the server's open."""
    sock = socket.create_connection((host, port))
    sock.settimeout(5)
    sock.sendall(handshake_until_open(idle_timeout_ms))
    assert _read_exactly(sock, 8) == SASL_HEADER
    read_frame(sock)  # sasl-mechanisms
    outcome = read_frame(sock)
    assert outcome is not None and code_of(outcome[2]) == SASL_OUTCOME
    assert _read_exactly(sock, 8) == AMQP_HEADER
    reply = read_frame(sock)
    assert reply is not None and code_of(reply[2]) == OPEN
    fields = decode_all(reply[2]).value
    return sock, list(fields) + [None] * (10 - len(fields))
