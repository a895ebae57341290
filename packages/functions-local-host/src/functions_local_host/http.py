"""HTTP triggers behind a small threaded HTTP server on 127.0.0.1.

Routes are ``/<routePrefix>/<route>`` (host.json extensions.http.routePrefix, "api" by default).
A request whose path matches no route, or matches only with another method (any method, TRACE
and WebDAV's included), gets 404 without a body, as on the Functions host (which does not answer
405 with Allow there; an open azure-functions-host issue asks it to). A request it cannot read
at all gets its 4xx or 505 with an empty body. The listen backlog is Kestrel's (512), and a
client that hangs up early is one log line. Auth levels: anonymous; function (a function key,
the host key or the master key); admin (the master key only). A key goes in the
``x-functions-key`` header or the ``code`` query parameter; a missing or wrong key gets 401.

The request goes to the worker as ``RpcHttp`` (the host's ToRpcHttp, for a worker that asked for
raw body bytes and the body alone); the worker's ``RpcHttp`` answer is the response.

The body is read before the function runs, within limits, each refused at once with a problem
document (RFC 9457) and the connection closed: a ``Content-Length`` that is not one decimal
number (negative, not a number, two different values, or next to ``Transfer-Encoding``) is 400;
a declared or chunked body over ``body_limit`` bytes is 413, without reading it; a body that
has not fully arrived ``read_timeout`` seconds after the headers is 408.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from .functions import FunctionSpec, invoke
from .routes import RouteTemplate
from .rpc import messages, typed_metadata

logger = logging.getLogger("functions_local_host")

# The Functions host's default request body limit (FUNCTIONS_REQUEST_BODY_SIZE_LIMIT), 100 MB.
DEFAULT_BODY_LIMIT = 104_857_600
DEFAULT_READ_TIMEOUT = 30.0
_DIGITS = re.compile(r"[0-9]+")
# Kestrel writes the response headers it knows with their usual spelling, others as given.
_KNOWN_HEADERS = {
    name.lower(): name
    for name in (
        "Accept-Ranges", "Age", "Allow", "Cache-Control", "Content-Disposition",
        "Content-Encoding", "Content-Language", "Content-Location", "Content-Range",
        "Content-Type", "Date", "ETag", "Expires", "Last-Modified", "Link", "Location",
        "Pragma", "Retry-After", "Server", "Vary", "WWW-Authenticate",
    )
}  # fmt: skip
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")


@dataclass(frozen=True)
class HttpRoute:
    spec: FunctionSpec
    template: RouteTemplate
    methods: frozenset[str] | None
    auth_level: str

    @classmethod
    def of(cls, spec: FunctionSpec) -> HttpRoute:
        methods = spec.setting("methods")
        return cls(
            spec=spec,
            template=RouteTemplate(str(spec.setting("route") or spec.name)),
            methods=frozenset(m.upper() for m in methods) if methods else None,
            auth_level=str(spec.setting("authLevel") or "function").lower(),
        )


@dataclass(frozen=True)
class FunctionKeys:
    """master: admin and function level; host: function level; per function: that function."""

    master: str
    host: str
    functions: Mapping[str, str]

    def allows(self, route: HttpRoute, key: str | None) -> bool:
        if route.auth_level == "anonymous":
            return True
        if not key:
            return False
        accepted = [self.master]
        if route.auth_level == "function":
            accepted.append(self.host)
            if route.spec.name in self.functions:
                accepted.append(self.functions[route.spec.name])
        return any(hmac.compare_digest(key.encode(), k.encode()) for k in accepted if k)


class RequestRefused(Exception):
    """The request cannot be read: answer ``status`` with a problem document, then close."""

    def __init__(self, status: int, title: str, detail: str, **members: Any) -> None:
        super().__init__(detail)
        self.status = status
        self.title = title
        self.detail = detail
        self.members = members


class HttpFrontEnd:
    def __init__(
        self,
        specs: list[FunctionSpec],
        *,
        keys: FunctionKeys,
        route_prefix: str,
        host: str = "127.0.0.1",
        port: int = 0,
        body_limit: int = DEFAULT_BODY_LIMIT,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
    ) -> None:
        self.routes = sorted(
            (HttpRoute.of(spec) for spec in specs), key=lambda r: r.template.precedence
        )
        self.keys = keys
        self.route_prefix = route_prefix.strip("/")
        self.body_limit = body_limit
        self.read_timeout = read_timeout
        front_end = self

        class Handler(_Handler):
            owner = front_end
            # Headers, and a keep-alive connection's wait for its next request, time out too.
            timeout = read_timeout

        self._server = _Server((host, port), Handler)
        self.port = int(self._server.server_address[1])
        self.base_url = f"http://{host}:{self.port}"
        self._thread: threading.Thread | None = None
        self._in_flight = 0
        self._idle = threading.Condition()

    def url_of(self, route: HttpRoute) -> str:
        prefix = f"/{self.route_prefix}" if self.route_prefix else ""
        return f"{self.base_url}{prefix}/{route.template.template}"

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="http", kwargs={"poll_interval": 0.2}
        )
        self._thread.start()

    def stop(self, timeout: float) -> None:
        """Stop accepting, then wait (up to ``timeout``) for the requests in flight."""
        self._server.shutdown()
        self._server.server_close()
        with self._idle:
            self._idle.wait_for(lambda: self._in_flight == 0, timeout)
        if self._thread is not None:
            self._thread.join(timeout)

    def find(self, method: str, path: str) -> tuple[HttpRoute, dict[str, str]] | None:
        prefix = f"/{self.route_prefix}" if self.route_prefix else ""
        if prefix:
            if path.lower() != prefix.lower() and not path.lower().startswith(prefix.lower() + "/"):
                return None
            path = path[len(prefix) :]
        for route in self.routes:
            if route.methods is not None and method not in route.methods:
                continue
            values = route.template.match(path)
            if values is not None:
                # Route values are decoded like ASP.NET Core does: all but %2F.
                return route, {
                    name: unquote(value.replace("%2F", "%252F").replace("%2f", "%252f"))
                    for name, value in values.items()
                }
        return None

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        with self._idle:
            self._in_flight += 1
        try:
            self._handle(handler)
        except RequestRefused as refused:
            _send_problem(handler, refused)
        finally:
            with self._idle:
                self._in_flight -= 1
                self._idle.notify_all()

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        started = time.monotonic()
        length = declared_length(handler.headers.get_all("Content-Length") or [])
        chunked = _is_chunked(handler.headers.get_all("Transfer-Encoding") or [])
        if chunked and length is not None:
            raise RequestRefused(
                400,
                "Conflicting body length",
                "A request has either Content-Length or Transfer-Encoding, not both.",
                errors=[{"field": "Content-Length", "problem": "sent with Transfer-Encoding"}],
            )
        if length is not None and length > self.body_limit:
            raise _too_large(length, self.body_limit)
        method = handler.command.upper()
        url = urlsplit(handler.path)
        found = self.find(method, url.path)
        if found is None:
            _send(handler, 404, {}, b"", close=bool(length) or chunked)
            return
        route, route_params = found
        query = _query(url.query)
        key = handler.headers.get("x-functions-key") or query.get("code")
        if not self.keys.allows(route, key):
            _send(handler, 401, {}, b"", close=bool(length) or chunked)
            return
        deadline = started + self.read_timeout
        if chunked:
            body = read_chunked(handler, self.body_limit, deadline)
        else:
            body = read_body(handler, length or 0, deadline)
        headers = _headers(handler)
        http = messages.RpcHttp(
            method=method,
            url=f"http://{headers.get('host') or self.base_url.split('//', 1)[1]}{handler.path}",
            headers=headers,
            params=route_params,
            query=query,
        )
        if body:
            http.body.CopyFrom(messages.TypedData(bytes=body))
        outcome = invoke(
            route.spec,
            messages.TypedData(http=http),
            # The HTTP extension's binding data: the route values, the query and the headers.
            trigger_metadata=typed_metadata({**route_params, "Query": query, "Headers": headers}),
            reason="This function was programmatically called via the host APIs.",
            trace_parent=headers.get("traceparent", ""),
            trace_state=headers.get("tracestate", ""),
        )
        if not outcome.succeeded:
            _send(handler, 500, {}, b"")
            return
        _send_response(handler, outcome.return_value)


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


def _too_large(length: int, limit: int) -> RequestRefused:
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


def _wait(handler: BaseHTTPRequestHandler, deadline: float) -> None:
    """Let the next socket read wait until ``deadline`` at most."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise _timed_out()
    handler.connection.settimeout(left)


def read_body(handler: BaseHTTPRequestHandler, length: int, deadline: float) -> bytes:
    """Exactly ``length`` bytes of body, all of them before ``deadline``."""
    parts: list[bytes] = []
    missing = length
    while missing > 0:
        _wait(handler, deadline)
        try:
            part = handler.rfile.read1(min(missing, 65536))
        except TimeoutError as error:
            raise _timed_out() from error
        if not part:
            raise RequestRefused(
                400,
                "Incomplete request body",
                f"The connection ended {missing} bytes short of Content-Length ({length}).",
                errors=[{"field": "Content-Length", "problem": "more than the body sent"}],
            )
        parts.append(part)
        missing -= len(part)
    return b"".join(parts)


def read_chunked(handler: BaseHTTPRequestHandler, limit: int, deadline: float) -> bytes:
    """A chunked body (RFC 9112 7.1), refused as soon as it passes ``limit`` bytes."""
    parts: list[bytes] = []
    total = 0
    while True:
        size_line = _read_line(handler, deadline)
        size_text = size_line.split(b";", 1)[0].strip()
        if not _CHUNK_SIZE.fullmatch(size_text):
            raise RequestRefused(
                400,
                "Invalid chunked body",
                "A chunk size is not a hexadecimal number.",
                errors=[{"field": "Transfer-Encoding", "problem": "malformed chunk size"}],
            )
        size = int(size_text, 16)
        if size == 0:
            while _read_line(handler, deadline) not in (b"", b"\r\n", b"\n"):
                pass  # trailer fields
            return b"".join(parts)
        total += size
        if total > limit:
            raise _too_large(total, limit)
        parts.append(read_body(handler, size, deadline))
        _read_line(handler, deadline)  # the CRLF after the chunk


def _read_line(handler: BaseHTTPRequestHandler, deadline: float) -> bytes:
    _wait(handler, deadline)
    try:
        return bytes(handler.rfile.readline(4096))
    except TimeoutError as error:
        raise _timed_out() from error


def _query(query: str) -> dict[str, str]:
    """The query as the host passes it: repeated names joined with commas, empty values left
    out."""
    values: dict[str, list[str]] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        values.setdefault(name, []).append(value)
    joined = {name: ",".join(items) for name, items in values.items()}
    return {name: value for name, value in joined.items() if value}


def _headers(handler: BaseHTTPRequestHandler) -> dict[str, str]:
    headers: dict[str, list[str]] = {}
    for name, value in handler.headers.items():
        headers.setdefault(name.lower(), []).append(value)
    return {name: ",".join(values) for name, values in headers.items()}


def _send_response(handler: BaseHTTPRequestHandler, result: Any) -> None:
    """The worker's return value (``TypedData``) as the HTTP response."""
    kind = result.WhichOneof("data") if result is not None else None
    if kind is None:
        _send(handler, 204, {}, b"")
        return
    if kind != "http":
        body = _body_bytes(result)
        _send(handler, 200, {"Content-Type": "text/plain; charset=utf-8"}, body)
        return
    http = result.http
    headers = {
        _KNOWN_HEADERS.get(name.lower(), name): value for name, value in http.headers.items()
    }
    cookies = [_set_cookie(cookie) for cookie in http.cookies]
    _send(
        handler,
        int(http.status_code or 200),
        headers,
        _body_bytes(http.body) if http.HasField("body") else b"",
        cookies=cookies,
    )


def _body_bytes(data: Any) -> bytes:
    kind = data.WhichOneof("data")
    if kind in ("bytes", "stream"):
        return bytes(getattr(data, kind))
    if kind in ("string", "json"):
        return str(getattr(data, kind)).encode()
    if kind in ("int", "double"):
        return str(getattr(data, kind)).encode()
    return b""


def _set_cookie(cookie: Any) -> str:
    parts = [f"{cookie.name}={cookie.value}"]
    if cookie.HasField("domain"):
        parts.append(f"domain={cookie.domain.value}")
    if cookie.HasField("path"):
        parts.append(f"path={cookie.path.value}")
    if cookie.HasField("expires"):
        moment = cookie.expires.value.ToDatetime()
        parts.append(f"expires={moment.strftime('%a, %d %b %Y %H:%M:%S GMT')}")
    if cookie.HasField("max_age"):
        parts.append(f"max-age={int(cookie.max_age.value)}")
    if cookie.HasField("secure") and cookie.secure.value:
        parts.append("secure")
    if cookie.HasField("http_only") and cookie.http_only.value:
        parts.append("httponly")
    same_site = {1: "lax", 2: "strict", 3: "none"}.get(int(cookie.same_site))
    if same_site:
        parts.append(f"samesite={same_site}")
    return "; ".join(parts)


def _send_problem(handler: BaseHTTPRequestHandler, refused: RequestRefused) -> None:
    document = {
        "type": "about:blank",
        "title": refused.title,
        "status": refused.status,
        "detail": refused.detail,
        **refused.members,
    }
    body = json.dumps(document).encode()
    headers = {"Content-Type": "application/problem+json"}
    _send(handler, refused.status, headers, body, close=True)


def _send(
    handler: BaseHTTPRequestHandler,
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    *,
    cookies: list[str] | None = None,
    close: bool = False,
) -> None:
    """Write the response; ``close`` ends the connection after it (the request's body, if it
    had one, was not read)."""
    handler.connection.settimeout(handler.timeout)
    handler.send_response(status)
    for name, value in headers.items():
        if name.lower() not in ("content-length", "transfer-encoding", "connection"):
            handler.send_header(name, value)
    for cookie in cookies or []:
        handler.send_header("Set-Cookie", cookie)
    handler.send_header("Content-Length", str(len(body)))
    if close:
        handler.send_header("Connection", "close")
        handler.close_connection = True
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(body)


class _Server(ThreadingHTTPServer):
    # Kestrel's listen backlog (SocketTransportOptions.Backlog): a burst of clients waits to be
    # accepted. socketserver's 5 had the kernel reset connections of a burst of 20.
    request_queue_size = 512
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up before its answer is written (``curl -f`` on a 404 does) is
        one line, as in Kestrel's log; socketserver printed a traceback to stderr."""
        error = sys.exception()
        where = f"{client_address[0]}:{client_address[1]}"
        if isinstance(error, ConnectionError):
            logger.info("The client %s hung up (%s)", where, type(error).__name__)
        else:
            logger.error("The request from %s failed", where, exc_info=error)


class _Handler(BaseHTTPRequestHandler):
    owner: HttpFrontEnd
    protocol_version = "HTTP/1.1"

    def _dispatch(self) -> None:
        self.owner.handle(self)

    def __getattr__(self, name: str) -> Any:
        # Every method goes to the routes, as on Kestrel: TRACE, PROPFIND or a method of its own
        # gets the 404 of a route it does not match, not http.server's HTML 501 page.
        if name.startswith("do_"):
            return self._dispatch
        raise AttributeError(name)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """A request http.server cannot read (a malformed request line, headers too long):
        the status with an empty body and the connection closed, as Kestrel answers, instead
        of an HTML page."""
        logger.info("%s: %d %s", self.address_string(), code, message or "")
        self.close_connection = True
        # Before the request line is read the version is 0.9's, which has no status line.
        self.request_version = self.protocol_version
        self.send_response(code)  # the standard reason phrase, not the request's text
        self.send_header("Content-Length", "0")
        self.send_header("Connection", "close")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s - %s", self.address_string(), format % args)
