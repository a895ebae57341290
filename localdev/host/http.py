"""HTTP triggers behind a small threaded HTTP server on 127.0.0.1.

Routes are ``/<routePrefix>/<route>`` (host.json extensions.http.routePrefix, "api" by default).
A request whose path matches no route, or matches only with another method, gets 404, as on the
Functions host. Auth levels: anonymous; function (a function key, the host key or the master
key); admin (the master key only). A key goes in the ``x-functions-key`` header or the ``code``
query parameter; a missing or wrong key gets 401.
"""

from __future__ import annotations

import hmac
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import azure.functions as func

from .functions import FunctionSpec, invoke
from .routes import RouteTemplate

logger = logging.getLogger("localdev.host")


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


class HttpFrontEnd:
    def __init__(
        self,
        specs: list[FunctionSpec],
        *,
        keys: FunctionKeys,
        route_prefix: str,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.routes = sorted(
            (HttpRoute.of(spec) for spec in specs), key=lambda r: r.template.precedence
        )
        self.keys = keys
        self.route_prefix = route_prefix.strip("/")
        front_end = self

        class Handler(_Handler):
            owner = front_end

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
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
        finally:
            with self._idle:
                self._in_flight -= 1
                self._idle.notify_all()

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        method = handler.command.upper()
        url = urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        found = self.find(method, url.path)
        if found is None:
            _send(handler, 404, {}, b"")
            return
        route, route_params = found
        params = dict(parse_qsl(url.query, keep_blank_values=True))
        key = handler.headers.get("x-functions-key") or params.get("code")
        if not self.keys.allows(route, key):
            _send(handler, 401, {}, b"")
            return
        request = func.HttpRequest(
            method=method,
            url=f"{self.base_url}{handler.path}",
            headers={name.lower(): value for name, value in handler.headers.items()},
            params=params,
            route_params=route_params,
            body=body,
        )
        succeeded, result, _ = invoke(
            route.spec,
            {route.spec.arg_name: request},
            reason="This function was programmatically called via the host APIs.",
        )
        if not succeeded:
            _send(handler, 500, {}, b"")
            return
        _send_response(handler, result)


def _send_response(handler: BaseHTTPRequestHandler, result: Any) -> None:
    if result is None:
        _send(handler, 204, {}, b"")
        return
    if isinstance(result, str | bytes):
        body = result.encode() if isinstance(result, str) else result
        _send(handler, 200, {"Content-Type": "text/plain; charset=utf-8"}, body)
        return
    if not isinstance(result, func.HttpResponse):
        logger.error("The function returned %s, not an HttpResponse", type(result).__name__)
        _send(handler, 500, {}, b"")
        return
    headers = dict(result.headers.items())
    if not any(name.lower() == "content-type" for name in headers):
        mimetype = result.mimetype or "text/plain"
        charset = result.charset or "utf-8"
        headers["Content-Type"] = f"{mimetype}; charset={charset}"
    _send(handler, result.status_code, headers, result.get_body() or b"")


def _send(
    handler: BaseHTTPRequestHandler, status: int, headers: Mapping[str, str], body: bytes
) -> None:
    handler.send_response(status)
    for name, value in headers.items():
        if name.lower() not in ("content-length", "transfer-encoding"):
            handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(body)


class _Handler(BaseHTTPRequestHandler):
    owner: HttpFrontEnd
    protocol_version = "HTTP/1.1"

    def _dispatch(self) -> None:
        self.owner.handle(self)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _dispatch

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s - %s", self.address_string(), format % args)
