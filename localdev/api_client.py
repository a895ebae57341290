"""A small client of the app's HTTP API (what an operator or a shop front would call), for
``make demo`` and the end-to-end tests. Standard library only; every call sends the function
key in the ``x-functions-key`` header."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ApiResponse:
    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


class ApiError(RuntimeError):
    """The API answered with a status the caller did not expect; carries the problem document."""

    def __init__(self, method: str, path: str, response: ApiResponse) -> None:
        detail = response.body.decode(errors="replace")[:500]
        super().__init__(f"{method} {path} answered {response.status}: {detail}")
        self.response = response


class AppClient:
    def __init__(self, api_url: str, key: str | None, *, timeout: float = 30.0) -> None:
        self.api_url = api_url.rstrip("/")
        self._key = key
        self._timeout = timeout

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, str | None] | None = None,
        with_key: bool = True,
    ) -> ApiResponse:
        """Any status comes back as an ``ApiResponse``; only a connection failure raises."""
        query = {k: v for k, v in (params or {}).items() if v is not None}
        url = f"{self.api_url}/{path.lstrip('/')}"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        all_headers = dict(headers or {})
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            all_headers.setdefault("Content-Type", "application/json")
        if with_key and self._key:
            all_headers["x-functions-key"] = self._key
        request = urllib.request.Request(url, data=data, method=method, headers=all_headers)
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                return ApiResponse(response.status, dict(response.headers), response.read())
        except urllib.error.HTTPError as error:
            return ApiResponse(error.code, dict(error.headers), error.read())

    def _expect(self, method: str, path: str, status: int, **kwargs: Any) -> Any:
        response = self.request(method, path, **kwargs)
        if response.status != status:
            raise ApiError(method, path, response)
        return response.json()

    # -- orders -------------------------------------------------------------------------------

    def submit_order(self, order: Mapping[str, Any], *, idempotency_key: str) -> dict[str, Any]:
        """POST /api/orders: 202 with job_id and session_id."""
        return dict(
            self._expect(
                "POST", "orders", 202, body=order, headers={"Idempotency-Key": idempotency_key}
            )
        )

    # -- imports ------------------------------------------------------------------------------

    def import_status(self, job_id: str) -> dict[str, Any] | None:
        """GET /api/imports/{job_id}: rows read, rejected, sent, imported, failed; None on 404
        (nothing is known of the job yet)."""
        response = self.request("GET", f"imports/{_segment(job_id)}")
        if response.status == 404:
            return None
        if response.status != 200:
            raise ApiError("GET", f"imports/{job_id}", response)
        return dict(response.json())

    # -- failed sessions ----------------------------------------------------------------------

    def failed_sessions(self, **filters: str | None) -> list[dict[str, Any]]:
        """GET /api/failed-sessions, every page (filters: queue, task, reason, status)."""
        return list(self._failed_session_pages(filters))

    def _failed_session_pages(self, filters: Mapping[str, str | None]) -> Iterator[dict[str, Any]]:
        continuation: str | None = None
        while True:
            page = self._expect(
                "GET",
                "failed-sessions",
                200,
                params={**filters, "page_size": "200", "continuation": continuation},
            )
            yield from page["items"]
            continuation = page.get("continuation")
            if not continuation:
                return

    def failed_session(self, session_id: str) -> dict[str, Any]:
        """GET /api/failed-sessions/{id}: the summary and its archived messages in order."""
        return dict(self._expect("GET", f"failed-sessions/{_segment(session_id)}", 200))

    def failure_groups(self, **filters: str | None) -> list[dict[str, Any]]:
        """GET /api/failed-session-groups: sessions counted by (queue, failed task, reason)."""
        return list(self._expect("GET", "failed-session-groups", 200, params=filters)["groups"])

    def replay(self, session_id: str, *, idempotency_key: str) -> dict[str, Any]:
        """POST /api/failed-sessions/{id}/replay: 202 with the new session id."""
        return dict(
            self._expect(
                "POST",
                f"failed-sessions/{_segment(session_id)}/replay",
                202,
                headers={"Idempotency-Key": idempotency_key},
            )
        )


def _segment(value: str) -> str:
    return urllib.parse.quote(value, safe="")
