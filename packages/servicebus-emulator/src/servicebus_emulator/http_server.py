"""A small HTTP/1.1 server for the emulator's HTTP port: requests with a Content-Length body,
keep-alive (the SDKs' HTTP clients pool their connections), and a handler per request.
Malformed requests get a 400, bodies over the limit a 413 before they are read, and a client
that goes silent is dropped after a time-out."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote, urlsplit

log = logging.getLogger(__name__)

MAX_HEAD = 64 * 1024
MAX_BODY = 1024 * 1024
IDLE_SECONDS = 60.0
_REASONS = {
    200: "OK", 201: "Created", 204: "No Content", 400: "Bad Request", 404: "Not Found",
    405: "Method Not Allowed", 409: "Conflict", 411: "Length Required",
    413: "Content Too Large", 500: "Internal Server Error",
}  # fmt: skip


@dataclass
class Request:
    method: str
    path: str  # decoded, without the query
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    body: bytes = b""


@dataclass
class Response:
    status: int
    body: bytes = b""
    content_type: str = "application/xml; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Request], Awaitable[Response]]


async def serve(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, handle: Handler
) -> None:
    """Answer requests on one connection until the client closes it or goes silent."""
    try:
        while True:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IDLE_SECONDS)
            except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
                return
            except asyncio.LimitOverrunError:
                await _send(writer, Response(400, b"request head too large", "text/plain"), False)
                return
            request, problem = _parse(head)
            if request is None:
                await _send(writer, Response(400, problem.encode(), "text/plain"), False)
                return
            length = request.headers.get("content-length", "0")
            if "chunked" in request.headers.get("transfer-encoding", "").lower():
                await _send(writer, Response(411, b"send a Content-Length", "text/plain"), False)
                return
            if not length.isdigit():
                await _send(writer, Response(400, b"bad Content-Length", "text/plain"), False)
                return
            if int(length) > MAX_BODY:
                await _send(writer, Response(413, b"body over 1 MiB", "text/plain"), False)
                return
            try:
                request.body = await asyncio.wait_for(reader.readexactly(int(length)), IDLE_SECONDS)
            except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
                return
            try:
                response = await handle(request)
            except Exception:
                log.exception("the HTTP request %s %s failed", request.method, request.path)
                response = Response(500, b"the emulator hit an internal error", "text/plain")
            keep = request.headers.get("connection", "").lower() != "close"
            await _send(writer, response, keep)
            if not keep:
                return
    except ConnectionError:
        return
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


def _parse(head: bytes) -> tuple[Request | None, str]:
    try:
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ", 2)
    except ValueError:
        return None, "malformed request line"
    if not version.startswith("HTTP/1."):
        return None, "HTTP/1.x only"
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            return None, f"malformed header line {line[:40]!r}"
        headers[name.strip().lower()] = value.strip()
    parts = urlsplit(target)
    query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    return Request(method.upper(), unquote(parts.path), query, headers), ""


async def _send(writer: asyncio.StreamWriter, response: Response, keep: bool) -> None:
    reason = _REASONS.get(response.status, "Unknown")
    head = [f"HTTP/1.1 {response.status} {reason}", f"Content-Length: {len(response.body)}"]
    if response.body:
        head.append(f"Content-Type: {response.content_type}")
    head += [f"{name}: {value}" for name, value in response.headers.items()]
    head.append("Connection: keep-alive" if keep else "Connection: close")
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + response.body)
    await writer.drain()
