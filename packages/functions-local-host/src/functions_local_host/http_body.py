"""Reading a request's body before the function runs, within limits, each refused at once with
a problem document (RFC 9457) and the connection closed: a ``Content-Length`` that is not one
decimal number (negative, not a number, two different values, or next to
``Transfer-Encoding``) is 400; a transfer coding other than chunked 501; a declared or chunked
body over the limit 413, without reading it; a body that has not fully arrived within the
timeout (from the end of the headers) 408; a connection that ends short of the body 400."""

from __future__ import annotations

import asyncio
import re
from email.message import Message
from typing import Any

_DIGITS = re.compile(r"[0-9]+")
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")
_CHUNK_LINE = 4096


class RequestRefused(Exception):
    """The request cannot be read: answer ``status`` with a problem document, then close."""

    def __init__(self, status: int, title: str, detail: str, **members: Any) -> None:
        super().__init__(detail)
        self.status = status
        self.title = title
        self.detail = detail
        self.members = members


def body_framing(headers: Message) -> tuple[int | None, bool]:
    """The declared length (None without one) and whether the body is chunked; refuses a
    malformed or conflicting framing."""
    length = declared_length(headers.get_all("Content-Length") or [])
    chunked = _is_chunked(headers.get_all("Transfer-Encoding") or [])
    if chunked and length is not None:
        raise RequestRefused(
            400,
            "Conflicting body length",
            "A request has either Content-Length or Transfer-Encoding, not both.",
            errors=[{"field": "Content-Length", "problem": "sent with Transfer-Encoding"}],
        )
    return length, chunked


def declared_length(values: list[str]) -> int | None:
    """The body length of the ``Content-Length`` header fields (RFC 9110 8.6): one decimal
    number, possibly repeated (``5, 5`` or two fields with 5); anything else is refused."""
    if not values:
        return None
    numbers = {item.strip() for value in values for item in value.split(",")}
    if len(numbers) != 1 or not _DIGITS.fullmatch(next(iter(numbers))):
        shown = ", ".join(values)
        raise RequestRefused(
            400,
            "Invalid Content-Length",
            f"Content-Length must be one decimal number of bytes; the request sent {shown!r}.",
            errors=[{"field": "Content-Length", "problem": "not one non-negative integer"}],
        )
    return int(next(iter(numbers)))


def _is_chunked(values: list[str]) -> bool:
    codings = [item.strip().lower() for value in values for item in value.split(",")]
    codings = [c for c in codings if c]
    if not codings:
        return False
    if codings != ["chunked"]:
        raise RequestRefused(
            501,
            "Unsupported Transfer-Encoding",
            f"Only the chunked transfer coding is supported; the request sent {codings}.",
            errors=[{"field": "Transfer-Encoding", "problem": "only chunked is supported"}],
        )
    return True


def too_large(length: int, limit: int) -> RequestRefused:
    return RequestRefused(
        413,
        "Request body too large",
        f"The request body ({length} bytes or more) is over the limit of {limit} bytes.",
        errors=[{"field": "body", "problem": f"over {limit} bytes"}],
        limit=limit,
    )


def _timed_out() -> RequestRefused:
    return RequestRefused(
        408,
        "Request body not received in time",
        "The request body did not arrive within the read timeout.",
        errors=[{"field": "body", "problem": "not received within the read timeout"}],
    )


async def read_body(
    reader: asyncio.StreamReader, headers: Message, *, limit: int, timeout: float
) -> bytes:
    """The whole body, all of it within ``timeout`` seconds."""
    length, chunked = body_framing(headers)
    try:
        async with asyncio.timeout(timeout):
            if chunked:
                return await _read_chunked(reader, limit)
            return await _read_exactly(reader, length or 0)
    except TimeoutError as error:
        raise _timed_out() from error


async def _read_exactly(reader: asyncio.StreamReader, length: int) -> bytes:
    try:
        return await reader.readexactly(length)
    except asyncio.IncompleteReadError as short:
        raise RequestRefused(
            400,
            "Incomplete request body",
            f"The connection ended {length - len(short.partial)} bytes short of "
            f"Content-Length ({length}).",
            errors=[{"field": "Content-Length", "problem": "more than the body sent"}],
        ) from short


async def _read_chunked(reader: asyncio.StreamReader, limit: int) -> bytes:
    """A chunked body (RFC 9112 7.1), refused as soon as it passes ``limit`` bytes."""
    parts: list[bytes] = []
    total = 0
    while True:
        size_text = (await _line(reader)).split(b";", 1)[0].strip()
        if not _CHUNK_SIZE.fullmatch(size_text):
            raise RequestRefused(
                400,
                "Invalid chunked body",
                "A chunk size is not a hexadecimal number.",
                errors=[{"field": "Transfer-Encoding", "problem": "malformed chunk size"}],
            )
        size = int(size_text, 16)
        if size == 0:
            while await _line(reader) not in (b"", b"\r\n", b"\n"):
                pass  # trailer fields
            return b"".join(parts)
        total += size
        if total > limit:
            raise too_large(total, limit)
        parts.append(await _read_exactly(reader, size))
        await _line(reader)  # the CRLF after the chunk


async def _line(reader: asyncio.StreamReader) -> bytes:
    line = await reader.readline()
    if len(line) > _CHUNK_LINE:
        raise RequestRefused(400, "Invalid chunked body", "A chunk line is too long.")
    return line
