"""Every HTTP request a Storage client of the app sends (retries included), counted by table,
container or queue and by kind, in the ``storage.requests`` metric (docs/telemetry.md). The
counts are the input of the capacity model (docs/capacity.md): Table Storage's targets are per
partition and per account, and Blob Storage's per account, in requests per second.

One hook, installed on every Storage client where it is built (``azure_clients``); without
telemetry it returns at its first check.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote, urlsplit

from ..telemetry.setup import telemetry

RESOURCE = "storage.resource"
OPERATION = "storage.operation"

# A sub-request of an entity group transaction names its table: "POST http://.../products HTTP/1.1"
_BATCH_TABLE = re.compile(rb"^(?:GET|POST|PUT|PATCH|MERGE|DELETE) \S*?/(\w+)(?:\(|\?| )", re.M)
_ENTITY = re.compile(r"^(\w+)\((.*)\)$")


class StorageRequestCounter:
    """A ``raw_request_hook`` for one service's clients (``service``: table, blob or queue).
    ``base_path`` is the path of the service's address (``/devstoreaccount1`` for Azurite),
    stripped before the table, container or queue is read from a request's path."""

    def __init__(self, service: str) -> None:
        self.service = service
        self.base_path = ""

    def __call__(self, request: Any) -> None:
        metrics = telemetry().metrics
        if metrics is None:
            return
        resource, operation = self.describe(request.http_request)
        metrics.storage_requests.add(1, {RESOURCE: resource, OPERATION: operation})

    def describe(self, http: Any) -> tuple[str, str]:
        """(table / container / queue, kind of request) of one HTTP request."""
        path = unquote(urlsplit(http.url).path)
        if self.base_path and path.startswith(self.base_path):
            path = path[len(self.base_path) :]
        parts = [part for part in path.split("/") if part]
        method = http.method.upper()
        if self.service == "table":
            return _table_request(method, parts, http)
        name = parts[0] if parts else ""
        query = urlsplit(http.url).query
        if self.service == "blob":
            if "restype=container" in query or len(parts) < 2:
                return name, f"container {method}"
            kinds = {"GET": "download", "PUT": "upload", "HEAD": "properties", "DELETE": "delete"}
            return name, kinds.get(method, method)
        kinds = {"POST": "send", "GET": "receive", "DELETE": "delete", "PUT": "update"}
        return name, kinds.get(method, method) if len(parts) > 1 else f"queue {method}"


def _table_request(method: str, parts: list[str], http: Any) -> tuple[str, str]:
    last = parts[-1] if parts else ""
    if last == "$batch":
        body = http.body if isinstance(http.body, bytes) else str(http.body or "").encode()
        found = _BATCH_TABLE.search(body)
        return (found.group(1).decode() if found else "?"), "transaction"
    if last == "Tables" or last.startswith("Tables("):
        return last, f"table {method}"
    entity = _ENTITY.match(last)
    if entity is None:
        return last, {"POST": "insert", "GET": "query"}.get(method, method)
    table, keys = entity.groups()
    if not keys:
        return table, "query" if method == "GET" else method
    if method == "PUT":
        return table, "replace" if "If-Match" in http.headers else "upsert"
    kinds = {"GET": "point read", "PATCH": "merge", "MERGE": "merge", "DELETE": "delete"}
    return table, kinds.get(method, method)
