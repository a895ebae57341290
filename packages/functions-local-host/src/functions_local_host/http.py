"""HTTP triggers behind the host's HTTP server (``http_server.py``: asyncio, Kestrel's limits).

Routes are ``/<routePrefix>/<route>`` (host.json extensions.http.routePrefix, "api" by default).
A request whose path matches no route, or matches only with another method (any method, TRACE
and WebDAV's included), gets 404 without a body, as on the Functions host (which does not answer
405 with Allow there; an open azure-functions-host issue asks it to). Auth levels: anonymous;
function (a function key, the host key or the master key); admin (the master key only). A key
goes in the ``x-functions-key`` header or the ``code`` query parameter; a missing or wrong key
gets 401. ``GET /admin/host/status`` (master key) answers the host's status, as the Functions
host's admin API does.

The request goes to the worker as ``RpcHttp`` (the host's ToRpcHttp, for a worker that asked for
raw body bytes and the body alone); the worker's ``RpcHttp`` answer is the response. The body is
read before the function runs, within the limits of ``http_body.py``.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from .functions import FunctionSpec, invoke
from .http_server import (
    HEADERS_TIMEOUT,
    KEEP_ALIVE_TIMEOUT,
    HttpServer,
    RequestHead,
    Response,
    Routed,
)
from .routes import RouteTemplate
from .rpc import messages, typed_metadata

logger = logging.getLogger("functions_local_host")

# The Functions host's default request body limit (FUNCTIONS_REQUEST_BODY_SIZE_LIMIT), 100 MB.
DEFAULT_BODY_LIMIT = 104_857_600
DEFAULT_READ_TIMEOUT = HEADERS_TIMEOUT
HOST_STATUS_PATH = "/admin/host/status"
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
    """The HTTP functions on ``host`` (127.0.0.1): ``start()``, ``stop(timeout)``. ``status``
    gives the document of ``GET /admin/host/status``."""

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
        keep_alive_timeout: float = KEEP_ALIVE_TIMEOUT,
        max_connections: int | None = None,
        status: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        self.routes = sorted(
            (HttpRoute.of(spec) for spec in specs), key=lambda r: r.template.precedence
        )
        self.keys = keys
        self.route_prefix = route_prefix.strip("/")
        self._status = status
        self.server = HttpServer(
            self._route,
            host=host,
            port=port,
            body_limit=body_limit,
            headers_timeout=read_timeout,
            body_timeout=read_timeout,
            keep_alive_timeout=keep_alive_timeout,
            max_connections=max_connections,
        )
        self.port = self.server.port
        self.base_url = f"http://{host}:{self.port}"

    def url_of(self, route: HttpRoute) -> str:
        prefix = f"/{self.route_prefix}" if self.route_prefix else ""
        return f"{self.base_url}{prefix}/{route.template.template}"

    def start(self) -> None:
        self.server.start()

    def stop(self, timeout: float) -> None:
        """Stop accepting, then wait (up to ``timeout``) for the requests in flight."""
        self.server.stop(timeout)

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

    def _route(self, head: RequestHead) -> Response | Routed:
        """On the server's event loop: the route and the key; the invocation runs later."""
        url = urlsplit(head.target)
        query = _query(url.query)
        key = head.headers.get("x-functions-key") or query.get("code")
        if url.path == HOST_STATUS_PATH and head.method == "GET" and self._status is not None:
            if not key or not hmac.compare_digest(key.encode(), self.keys.master.encode()):
                return Response(401)
            document = json.dumps(dict(self._status())) + "\n"
            return Response(200, [("Content-Type", "application/json")], document.encode())
        found = self.find(head.method, url.path)
        if found is None:
            return Response(404)
        route, route_params = found
        if not self.keys.allows(route, key):
            return Response(401)
        return Routed(lambda body: self._invoke(head, route, route_params, query, body))

    def _invoke(
        self,
        head: RequestHead,
        route: HttpRoute,
        route_params: dict[str, str],
        query: dict[str, str],
        body: bytes,
    ) -> Response:
        """On a pool thread: the invocation and its response."""
        headers = _headers(head)
        http = messages.RpcHttp(
            method=head.method,
            url=f"http://{headers.get('host') or self.base_url.split('//', 1)[1]}{head.target}",
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
            return Response(500)
        return _response(outcome.return_value)


def _query(query: str) -> dict[str, str]:
    """The query as the host passes it: repeated names joined with commas, empty values left
    out."""
    values: dict[str, list[str]] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        values.setdefault(name, []).append(value)
    joined = {name: ",".join(items) for name, items in values.items()}
    return {name: value for name, value in joined.items() if value}


def _headers(head: RequestHead) -> dict[str, str]:
    headers: dict[str, list[str]] = {}
    for name, value in head.headers.items():
        headers.setdefault(name.lower(), []).append(value)
    return {name: ",".join(values) for name, values in headers.items()}


def _response(result: Any) -> Response:
    """The worker's return value (``TypedData``) as the HTTP response."""
    kind = result.WhichOneof("data") if result is not None else None
    if kind is None:
        return Response(204)
    if kind != "http":
        return Response(200, [("Content-Type", "text/plain; charset=utf-8")], _body_bytes(result))
    http = result.http
    headers = [
        (_KNOWN_HEADERS.get(name.lower(), name), value) for name, value in http.headers.items()
    ]
    headers += [("Set-Cookie", _set_cookie(cookie)) for cookie in http.cookies]
    return Response(
        int(http.status_code or 200),
        headers,
        _body_bytes(http.body) if http.HasField("body") else b"",
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
