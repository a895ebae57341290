"""The HTTP front end's Kestrel limits, one at a time: the whole request headers within the
headers timeout (however slowly they trickle), an idle connection closed after the keep-alive
timeout, connections beyond the limit closed at once; and the host's status at
``/admin/host/status`` with the master key."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable

import pytest

from functions_local_host import LocalHost

KEYS = {"FUNCTIONS_HOST_KEY": "host-key", "FUNCTIONS_MASTER_KEY": "master-key"}


def port_of(host: LocalHost) -> int:
    return int(host.http_url.rsplit(":", 1)[1])


def get(host: LocalHost, path: str, key: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(
        f"{host.http_url}{path}", headers={"x-functions-key": key} if key else {}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def closed_by_server(connection: socket.socket, within: float) -> tuple[bool, bytes]:
    """Whether the server closed ``connection`` within ``within`` seconds, and what it sent."""
    connection.settimeout(within)
    received = b""
    try:
        while chunk := connection.recv(4096):
            received += chunk
    except TimeoutError:
        return False, received
    except ConnectionResetError:
        pass
    return True, received


def test_headers_that_trickle_in_are_cut_off_at_the_headers_timeout_with_a_408(
    run_host: Callable[..., LocalHost],
) -> None:
    host = run_host(["public"], settings=KEYS, http_read_timeout=1.0)
    with socket.create_connection(("127.0.0.1", port_of(host)), timeout=10) as connection:
        started = time.monotonic()
        connection.sendall(b"GET /api/public HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        answer = b""
        connection.settimeout(0.2)
        while time.monotonic() - started < 5:  # a byte every 0.2 s: each read is quick
            try:
                connection.sendall(b"a")
                answer += connection.recv(4096)
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                break
            if answer:
                break
        took = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert 0.9 <= took < 3, took


def test_an_idle_connection_is_closed_after_the_keep_alive_timeout(
    run_host: Callable[..., LocalHost],
) -> None:
    host = run_host(["public"], settings=KEYS, http_keep_alive_timeout=1.0)
    with socket.create_connection(("127.0.0.1", port_of(host)), timeout=10) as connection:
        connection.sendall(b"GET /api/public HTTP/1.1\r\nHost: x\r\n\r\n")
        started = time.monotonic()
        closed, answer = closed_by_server(connection, within=5)
    assert closed and answer.startswith(b"HTTP/1.1 200 ")  # answered, kept alive, then closed
    assert 0.9 <= time.monotonic() - started < 4


def test_connections_over_the_limit_are_closed_at_once(
    run_host: Callable[..., LocalHost],
) -> None:
    host = run_host(["public"], settings=KEYS, http_max_connections=5)
    held = [socket.create_connection(("127.0.0.1", port_of(host)), timeout=10) for _ in range(5)]
    try:
        time.sleep(0.3)  # all five accepted
        with socket.create_connection(("127.0.0.1", port_of(host)), timeout=10) as sixth:
            sixth.sendall(b"GET /api/public HTTP/1.1\r\nHost: x\r\n\r\n")
            closed, answer = closed_by_server(sixth, within=3)
        assert closed and answer == b""
    finally:
        for connection in held:
            connection.close()
    time.sleep(0.3)
    assert get(host, "/api/public")[0] == 200  # room again


def test_the_host_status_takes_the_master_key(run_host: Callable[..., LocalHost]) -> None:
    host = run_host(["public"], settings=KEYS)

    status, body = get(host, "/admin/host/status", key="master-key")

    assert status == 200 and body.endswith(b"}\n")
    document = json.loads(body)
    assert document["state"] == "Running" and document["errors"] == []
    assert document["workerProcesses"] is False
    assert get(host, "/admin/host/status", key="host-key")[0] == 401
    assert get(host, "/admin/host/status")[0] == 401


@pytest.mark.parametrize(
    ("request_head", "status"),
    [
        (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n", 414),
        (b"GET /api/public HTTP/1.1\r\n" + b"X-Big: " + b"a" * 33_000 + b"\r\n\r\n", 431),
        (b"GET /api/public HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % n for n in range(101)), 431),
        (b"GET /api/public HTTP/1.1\r\n folded: header\r\n\r\n", 400),
    ],
)
def test_request_lines_and_headers_over_kestrels_sizes_are_refused(
    run_host: Callable[..., LocalHost], request_head: bytes, status: int
) -> None:
    host = run_host(["public"], settings=KEYS)
    with socket.create_connection(("127.0.0.1", port_of(host)), timeout=10) as connection:
        connection.sendall(request_head + b"\r\n")
        closed, answer = closed_by_server(connection, within=5)
    assert closed and answer.startswith(b"HTTP/1.1 %d " % status)
