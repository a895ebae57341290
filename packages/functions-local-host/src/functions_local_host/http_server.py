"""The host's HTTP/1.1 server: one asyncio event loop for every connection, with Kestrel's
limits (learn.microsoft.com, KestrelServerLimits), and the app's work on a bounded pool.

Kestrel, the Functions host's web server, bounds what a client can hold:

- ``RequestHeadersTimeout`` (30 s by default): the whole request line and headers must arrive
  within it, counted from the request's first byte, however slowly the bytes trickle; past it
  Kestrel answers 408 and closes. Here: ``headers_timeout``.
- ``KeepAliveTimeout`` (130 s): a connection that waits for its next request (or its first) is
  closed after it. Here: ``keep_alive_timeout``.
- ``MaxConcurrentConnections`` (unlimited by default): beyond it Kestrel closes each new
  connection at once (``ConnectionLimitMiddleware``). Here: ``max_connections``, by default
  half the process's file descriptors up to 10,000, since the host shares its process with the
  triggers and their connections.
- ``MaxRequestLineSize`` 8 KB (414), ``MaxRequestHeadersTotalSize`` 32 KB and
  ``MaxRequestHeaderCount`` 100 (431).

A connection costs a coroutine, not a thread: thousands of idle or slow clients hold no thread
and no worker. A request that has been read runs on ``workers`` threads at most (the rest wait
their turn), so the triggers' and timers' threads always have the machine too. The listen
backlog is Kestrel's (``SocketTransportOptions.Backlog``, 512).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import http
import json
import logging
import resource
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.client import HTTPMessage, parse_headers
from io import BytesIO

from .http_body import RequestRefused, body_framing, read_body, too_large

logger = logging.getLogger("functions_local_host")

HEADERS_TIMEOUT = 30.0  # Kestrel's RequestHeadersTimeout
KEEP_ALIVE_TIMEOUT = 130.0  # Kestrel's KeepAliveTimeout
MAX_REQUEST_LINE = 8 * 1024  # Kestrel's MaxRequestLineSize
MAX_HEADERS_TOTAL = 32 * 1024  # Kestrel's MaxRequestHeadersTotalSize
MAX_HEADER_COUNT = 100  # Kestrel's MaxRequestHeaderCount
BACKLOG = 512  # Kestrel's SocketTransportOptions.Backlog
WORKERS = 32
_CONNECTIONS_CAP = 10_000
_REFUSALS_LOGGED_EVERY = 10.0


def default_max_connections() -> int:
    """Half the process's file descriptors (its soft limit), at most 10,000."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return _CONNECTIONS_CAP
    return max(64, min(_CONNECTIONS_CAP, soft // 2))


@dataclass
class RequestHead:
    """A request's line and headers, as read."""

    method: str
    target: str
    version: str
    headers: HTTPMessage
    client: str

    def wants_close(self) -> bool:
        connection = (self.headers.get("Connection") or "").lower()
        if self.version == "HTTP/1.0":
            return "keep-alive" not in connection
        return "close" in connection


@dataclass
class Response:
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    close: bool = False


@dataclass(frozen=True)
class Routed:
    """What the application answers a head with when it will run: ``run(body)``, on a pool
    thread, gives the response."""

    run: Callable[[bytes], Response]


Application = Callable[[RequestHead], "Response | Routed"]


class HttpServer:
    """``application(head)`` runs on the event loop for each request (routing and keys, no I/O)
    and answers a ``Response``, or a ``Routed`` whose body is read and whose ``run`` goes to the
    pool."""

    def __init__(
        self,
        application: Application,
        *,
        host: str,
        port: int,
        body_limit: int,
        headers_timeout: float = HEADERS_TIMEOUT,
        body_timeout: float = HEADERS_TIMEOUT,
        keep_alive_timeout: float = KEEP_ALIVE_TIMEOUT,
        max_connections: int | None = None,
        workers: int = WORKERS,
    ) -> None:
        self._application = application
        self._body_limit = body_limit
        self._headers_timeout = headers_timeout
        self._body_timeout = body_timeout
        self._keep_alive_timeout = keep_alive_timeout
        self.max_connections = max_connections or default_max_connections()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="http")
        self._loop = asyncio.new_event_loop()
        self._server = self._loop.run_until_complete(
            asyncio.start_server(
                self._connection,
                host,
                port,
                backlog=BACKLOG,
                limit=MAX_REQUEST_LINE + MAX_HEADERS_TOTAL,
            )
        )
        self.port = int(self._server.sockets[0].getsockname()[1])
        self._thread: threading.Thread | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._busy: set[asyncio.Task[None]] = set()  # connections with a request in hand
        self._refused = 0
        self._refusals_logged = 0.0

    @property
    def open_connections(self) -> int:
        return len(self._connections)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop.run_forever, name="http", daemon=True)
        self._thread.start()

    def stop(self, timeout: float) -> None:
        """Stop accepting, let the requests in hand finish (up to ``timeout``), close the rest."""
        if self._thread is None:
            return
        future = asyncio.run_coroutine_threadsafe(self._close(timeout), self._loop)
        with contextlib.suppress(Exception):
            future.result(timeout + 5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._pool.shutdown(wait=False, cancel_futures=True)
        if not self._loop.is_running():
            self._loop.close()
        self._thread = None

    async def _close(self, timeout: float) -> None:
        self._server.close()
        if self._busy:
            await asyncio.wait(set(self._busy), timeout=timeout)
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(set(self._connections), timeout=5)

    # -- one connection ------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if len(self._connections) >= self.max_connections:
            self._refuse(writer)
            return
        self._connections.add(task)
        peer = writer.get_extra_info("peername") or ("?", 0)
        client = f"{peer[0]}:{peer[1]}"
        try:
            while await self._one_request(reader, writer, client, task):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass  # the host is stopping
        except Exception:
            logger.exception("The request from %s failed", client)
        finally:
            self._connections.discard(task)
            self._busy.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1.0)

    def _refuse(self, writer: asyncio.StreamWriter) -> None:
        """Over ``max_connections``: closed at once, as Kestrel's ConnectionLimitMiddleware."""
        self._refused += 1
        writer.close()
        now = time.monotonic()
        if now - self._refusals_logged >= _REFUSALS_LOGGED_EVERY:
            self._refusals_logged = now
            logger.warning(
                "HTTP: %d connections are open, the limit; %d new ones closed at once so far",
                self.max_connections,
                self._refused,
            )

    async def _one_request(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        client: str,
        task: asyncio.Task[None],
    ) -> bool:
        """Read, run and answer one request; False when the connection is done."""
        try:
            first = await asyncio.wait_for(reader.read(1), self._keep_alive_timeout)
        except TimeoutError:
            return False  # idle past the keep-alive timeout
        if not first:
            return False  # the client closed
        try:
            async with asyncio.timeout(self._headers_timeout):
                head = await _read_head(reader, first, client)
        except TimeoutError:
            await _write(writer, Response(408, close=True), "GET", client)
            return False
        except RequestRefused as refused:
            await _write(writer, problem(refused), "GET", client)
            return False
        self._busy.add(task)  # a request in hand: a stop lets it finish
        try:
            response = await self._respond(reader, writer, head)
            await _write(writer, response, head.method, client, reader)
            return not (response.close or head.wants_close())
        finally:
            self._busy.discard(task)

    async def _respond(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: RequestHead
    ) -> Response:
        try:
            length, chunked = body_framing(head.headers)
            if length is not None and length > self._body_limit:
                raise too_large(length, self._body_limit)
            answer = self._application(head)
            if isinstance(answer, Response):
                # A body that is not read ends the connection with the answer.
                answer.close = answer.close or bool(length) or chunked
                return answer
            if (head.headers.get("Expect") or "").lower() == "100-continue":
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            body = await read_body(
                reader, head.headers, limit=self._body_limit, timeout=self._body_timeout
            )
        except RequestRefused as refused:
            return problem(refused)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, answer.run, body)


async def _read_head(reader: asyncio.StreamReader, first: bytes, client: str) -> RequestHead:
    line = first + await _line(reader, 414)
    if len(line) > MAX_REQUEST_LINE:
        raise RequestRefused(414, "Request line too long", "The request line is over 8 KB.")
    words = line.decode("latin-1").strip().split()
    if len(words) != 3:
        raise _malformed("The request line is not METHOD TARGET VERSION.")
    method, target, version = words
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        if version.startswith("HTTP/") and version[5:6].isdigit() and int(version[5:6]) >= 2:
            raise RequestRefused(505, "HTTP version not supported", f"{version} is not served.")
        raise _malformed(f"{version!r} is not an HTTP version.")
    lines: list[bytes] = []
    total = 0
    while (header := await _line(reader, 431)) not in (b"\r\n", b"\n"):
        if not header.endswith(b"\n"):
            raise asyncio.IncompleteReadError(header, None)  # the client closed mid-headers
        total += len(header)
        if total > MAX_HEADERS_TOTAL or len(lines) >= MAX_HEADER_COUNT:
            raise RequestRefused(
                431, "Request header fields too large", "Over 32 KB or 100 header fields."
            )
        if header[:1] in (b" ", b"\t") or b":" not in header:
            raise _malformed("A header line is folded or has no colon.")
        lines.append(header)
    headers = parse_headers(BytesIO(b"".join(lines) + b"\r\n"))
    return RequestHead(method.upper(), target, version, headers, client)


async def _line(reader: asyncio.StreamReader, too_long: int) -> bytes:
    """One line; a line longer than the reader's buffer is refused with ``too_long``."""
    try:
        return await reader.readline()
    except ValueError as error:  # the StreamReader's limit
        raise RequestRefused(too_long, "Request head too large", str(error)) from error


def _malformed(detail: str) -> RequestRefused:
    return RequestRefused(400, "Malformed request", detail)


def problem(refused: RequestRefused) -> Response:
    """A refused request's answer: its status with a problem document (RFC 9457), closing the
    connection; the request-line and header errors that Kestrel answers without a body get an
    empty one."""
    if refused.status in (414, 431, 505) or refused.title == "Malformed request":
        return Response(refused.status, close=True)
    document = {
        "type": "about:blank",
        "title": refused.title,
        "status": refused.status,
        "detail": refused.detail,
        **refused.members,
    }
    return Response(
        refused.status,
        [("Content-Type", "application/problem+json")],
        (json.dumps(document) + "\n").encode(),
        close=True,
    )


async def _write(
    writer: asyncio.StreamWriter,
    response: Response,
    method: str,
    client: str,
    reader: asyncio.StreamReader | None = None,
) -> None:
    """Write ``response``; a client that has hung up is one log line, as in Kestrel's log."""
    if writer.transport.is_closing():
        lost = reader.exception() if reader is not None else None
        logger.info("The client %s hung up (%s)", client, type(lost or EOFError()).__name__)
        return
    reason = _reason(response.status)
    lines = [f"HTTP/1.1 {response.status} {reason}", f"Date: {email.utils.formatdate(usegmt=True)}"]
    for name, value in response.headers:
        if name.lower() not in ("content-length", "transfer-encoding", "connection", "date"):
            lines.append(f"{name}: {value}")
    lines.append(f"Content-Length: {len(response.body)}")
    if response.close:
        lines.append("Connection: close")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", errors="replace")
    try:
        writer.write(head if method == "HEAD" else head + response.body)
        await writer.drain()
    except ConnectionError as error:
        logger.info("The client %s hung up (%s)", client, type(error).__name__)
        raise


def _reason(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return ""
