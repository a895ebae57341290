"""HTTP triggers: routes and their parameters, methods, auth levels and the response."""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from functions_local_host import LocalHost

HTTP_FUNCTIONS = ["public", "items", "special_items", "admin_only", "boom"]
KEYS = {"FUNCTIONS_HOST_KEY": "host-key", "FUNCTIONS_MASTER_KEY": "master-key"}


def call(
    url: str, *, method: str = "GET", headers: dict[str, str] | None = None, body: bytes = b""
) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, data=body or None, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


@pytest.fixture
def host(run_host: Callable[..., LocalHost]) -> LocalHost:
    return run_host(HTTP_FUNCTIONS, settings=KEYS)


def test_function_level_needs_a_key(host: LocalHost, seen: Any) -> None:
    status, _, _ = call(f"{host.http_url}/api/items/7/blue")
    assert status == 401
    status, _, _ = call(f"{host.http_url}/api/items/7/blue?code=wrong")
    assert status == 401
    assert seen.of("items") == []


def test_function_key_in_the_header_or_the_code_parameter(host: LocalHost, seen: Any) -> None:
    status, headers, body = call(
        f"{host.http_url}/api/items/7/blue?x=1",
        headers={"x-functions-key": "host-key", "x-test": "header"},
    )
    assert status == 200
    assert headers["X-Echo"] == "items"
    assert headers["Content-Type"].startswith("application/json")
    assert json.loads(body)["route_params"] == {"item_id": "7", "label": "blue"}

    status, _, body = call(
        f"{host.http_url}/api/items/8/red?code=master-key", method="POST", body=b"payload"
    )
    assert status == 201
    seen_request = json.loads(body)
    assert seen_request["method"] == "POST"
    assert seen_request["body"] == "payload"
    assert seen_request["params"] == {"code": "master-key"}
    assert seen_request["url"].endswith("/api/items/8/red?code=master-key")


def test_admin_level_takes_only_the_master_key(host: LocalHost) -> None:
    url = f"{host.http_url}/api/admin-only"
    assert call(url, method="POST", headers={"x-functions-key": "host-key"})[0] == 401
    assert call(url, method="POST", headers={"x-functions-key": "master-key"})[0] == 201


def test_anonymous_needs_no_key_and_optional_parameters_may_be_left_out(
    host: LocalHost, seen: Any
) -> None:
    status, _, body = call(f"{host.http_url}/api/public")
    assert status == 200
    assert json.loads(body)["route_params"] == {}
    status, _, body = call(f"{host.http_url}/api/public/ann%20e")
    assert json.loads(body)["route_params"] == {"name": "ann e"}


def test_constraints_and_literal_segments_pick_the_route(host: LocalHost, seen: Any) -> None:
    key = {"x-functions-key": "host-key"}
    # "special" is no int: only the literal route matches.
    status, headers, _ = call(f"{host.http_url}/api/items/special/x", headers=key)
    assert (status, headers["X-Echo"]) == (200, "special_items")
    # not an int and no literal route: no route at all.
    assert call(f"{host.http_url}/api/items/seven/x", headers=key)[0] == 404


def test_unknown_routes_and_wrong_methods_are_404_like_the_host(host: LocalHost) -> None:
    key = {"x-functions-key": "host-key"}
    assert call(f"{host.http_url}/api/nowhere", headers=key)[0] == 404
    assert call(f"{host.http_url}/items/7/blue", headers=key)[0] == 404  # no /api prefix
    assert call(f"{host.http_url}/api/public", method="DELETE")[0] == 404
    assert (
        call(f"{host.http_url}/api/admin-only", headers={"x-functions-key": "master-key"})[0] == 404
    )


def test_an_unhandled_exception_is_a_500(host: LocalHost) -> None:
    assert call(f"{host.http_url}/api/boom")[0] == 500


def test_route_prefix_and_generated_keys(run_host: Callable[..., LocalHost]) -> None:
    host = run_host(
        ["items"],
        settings={"FUNCTIONS_HOST_KEY": "", "FUNCTIONS_MASTER_KEY": ""},
        host_json={"version": "2.0", "extensions": {"http": {"routePrefix": "v1"}}},
    )
    key = host.function_keys.host
    assert len(key) >= 32
    assert call(f"{host.http_url}/v1/items/1/a", headers={"x-functions-key": key})[0] == 200
    assert call(f"{host.http_url}/api/items/1/a", headers={"x-functions-key": key})[0] == 404


# -- reading the request: malformed lengths, slow bodies, large bodies -------------------------

BODY_LIMIT = 100


@pytest.fixture
def strict_host(run_host: Callable[..., LocalHost]) -> LocalHost:
    """A host that takes 100-byte bodies and half a second to read one; a test that waited for
    a body the host should refuse at once would wait for the read timeout and get 408."""
    return run_host(
        HTTP_FUNCTIONS,
        settings={**KEYS, "FUNCTIONS_REQUEST_BODY_SIZE_LIMIT": str(BODY_LIMIT)},
        http_read_timeout=0.5,
    )


def raw_request(host: LocalHost, head: str, body: bytes = b"") -> tuple[int, dict[str, Any]]:
    """Send ``head`` (request line and headers) and ``body`` as they are; return the status and
    the JSON document of the answer."""
    port = int(host.http_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        response = connection.makefile("rb")
        status = int(response.readline().split()[1])
        length = 0
        while (line := response.readline().strip()) != b"":
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        content = response.read(length)
    return status, json.loads(content) if content else {}


def post_head(length_headers: str) -> str:
    return (
        "POST /api/items/1/a HTTP/1.1\nHost: 127.0.0.1\nx-functions-key: host-key\n"
        f"{length_headers}\n"
    )


@pytest.mark.parametrize(
    "length_headers",
    [
        "Content-Length: -1",
        "Content-Length: ten",
        "Content-Length: 5\nContent-Length: 6",
        "Content-Length: 5, 6",
        "Content-Length: 0x10",
        "Content-Length: 5\nTransfer-Encoding: chunked",
    ],
)
def test_a_malformed_content_length_is_a_400_at_once(
    strict_host: LocalHost, seen: Any, length_headers: str
) -> None:
    status, problem = raw_request(strict_host, post_head(length_headers))
    assert status == 400
    assert problem["status"] == 400
    assert problem["errors"][0]["field"] == "Content-Length"
    assert seen.of("items") == []


def test_a_repeated_equal_content_length_is_one_length(strict_host: LocalHost, seen: Any) -> None:
    status, _ = raw_request(strict_host, post_head("Content-Length: 5, 5"), b"hello")
    assert status == 201
    assert [c["body"] for c in seen.of("items")] == ["hello"]


def test_a_body_that_does_not_arrive_in_time_is_a_408(strict_host: LocalHost, seen: Any) -> None:
    status, problem = raw_request(strict_host, post_head("Content-Length: 10"), b"abc")
    assert status == 408
    assert problem["errors"][0]["field"] == "body"
    assert seen.of("items") == []


def test_a_body_over_the_limit_is_a_413_without_being_read(
    strict_host: LocalHost, seen: Any
) -> None:
    # Nothing of the declared body is sent: had the host waited for it, it would answer 408.
    status, problem = raw_request(strict_host, post_head(f"Content-Length: {BODY_LIMIT + 1}"))
    assert status == 413
    assert problem["limit"] == BODY_LIMIT
    assert problem["errors"][0]["field"] == "body"
    # A chunked body is refused as soon as it passes the limit.
    chunk = b"%x\r\n%s\r\n" % (BODY_LIMIT + 1, b"x" * (BODY_LIMIT + 1))
    status, problem = raw_request(strict_host, post_head("Transfer-Encoding: chunked"), chunk)
    assert status == 413
    assert seen.of("items") == []


def test_a_chunked_body_within_the_limit_reaches_the_function(
    strict_host: LocalHost, seen: Any
) -> None:
    chunks = b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    status, _ = raw_request(strict_host, post_head("Transfer-Encoding: chunked"), chunks)
    assert status == 201
    assert [c["body"] for c in seen.of("items")] == ["hello world"]


# -- many clients at once, and clients that go away ----------------------------------------------

BURST = 50


def split_write_post(port: int, n: int) -> int:
    """POST /api/items/{n}/burst as many clients do: the headers in one write, the body in a
    second; the answer's status."""
    body = f"request {n}".encode()
    head = (
        f"POST /api/items/{n}/burst HTTP/1.1\r\nHost: 127.0.0.1\r\nx-functions-key: host-key\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=60) as connection:
        connection.sendall(head.encode())
        connection.sendall(body)
        return int(connection.makefile("rb").readline().split()[1])


def test_a_burst_of_split_write_posts_is_answered_and_run_once_each(
    host: LocalHost, seen: Any
) -> None:
    port = int(host.http_url.rsplit(":", 1)[1])
    start = threading.Barrier(BURST)

    def client(n: int) -> int | str:
        start.wait()
        try:
            return split_write_post(port, n)
        except OSError as error:
            return type(error).__name__

    with ThreadPoolExecutor(BURST) as pool:
        statuses = list(pool.map(client, range(BURST)))

    assert statuses == [201] * BURST
    ran = sorted(int(call["route_params"]["item_id"]) for call in seen.of("items"))
    assert ran == list(range(BURST))


def raw_exchange(host: LocalHost, request: bytes) -> bytes:
    """Send ``request`` as it is; everything the host answers until it closes."""
    port = int(host.http_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(request)
        connection.shutdown(socket.SHUT_WR)
        return connection.makefile("rb").read()


@pytest.mark.parametrize("method", ["TRACE", "PROPFIND", "BREW"])
def test_any_other_method_on_a_known_route_is_the_hosts_empty_404(
    host: LocalHost, method: str
) -> None:
    answer = raw_exchange(host, f"{method} /api/public HTTP/1.1\r\nHost: x\r\n\r\n".encode())

    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 404 ") and body == b""


def test_a_request_the_host_cannot_read_is_answered_without_html(host: LocalHost) -> None:
    answer = raw_exchange(host, b"GET /api/public HTTP/9.9\r\n\r\n")

    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 505 ") and body == b""


def test_a_client_that_hangs_up_early_is_one_log_line_not_a_traceback(
    run_host: Callable[..., LocalHost],
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    host = run_host(["slow"])
    port = int(host.http_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(b"GET /api/slow?seconds=0.3 HTTP/1.1\r\nHost: x\r\n\r\n")
        # While the function runs (a reset that came before the host read the request would
        # throw the request away unread), close with a reset, as a client does that gives up:
        # the answer has nowhere to go.
        time.sleep(0.1)
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    def hung_up() -> list[str]:
        return [r.getMessage() for r in caplog.records if "hung up" in r.getMessage()]

    for _ in range(100):  # the slow function answers after 0.3 s; then the host notices
        if hung_up():
            break
        time.sleep(0.05)
    [line] = hung_up()
    assert line.startswith("The client 127.0.0.1:") and "Error" in line
    assert "Traceback" not in capfd.readouterr().err
