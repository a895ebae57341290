"""A connection storm on the host's HTTP port while it works: 5,000 connections that send
nothing, 200 that send their headers a byte a second, then all of them closed at once. Meanwhile
50 sessions ("orders") go through a Service Bus trigger and a timer fires every second: every
session completes, the API answers each request in under a second throughout, the timer keeps
its schedule, and the host's thread count stays bounded (a connection is a coroutine, not a
thread).

Loopback only, bounded in count and time (about 20 s). The process holds both ends of every
connection, about 10,500 file descriptors: the test raises its soft RLIMIT_NOFILE to what it
needs when the soft limit is lower (up to the hard limit; skipped when even that is too low)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from functions_local_host import LocalHost
from local_host_testing import FAST_HOST_JSON, wait_for

pytestmark = pytest.mark.integration

HALF_OPEN = 5_000
SLOW_HEADERS = 200
ORDERS = 50
HEADERS_TIMEOUT = 5.0
QUEUE = "sessions-http-load"
FDS_NEEDED = 2 * (HALF_OPEN + SLOW_HEADERS) + 1_000


@pytest.fixture
def enough_file_descriptors() -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < FDS_NEEDED:
        if hard != resource.RLIM_INFINITY and hard < FDS_NEEDED:
            pytest.skip(f"RLIMIT_NOFILE's hard limit {hard} is below the {FDS_NEEDED} needed")
        resource.setrlimit(resource.RLIMIT_NOFILE, (FDS_NEEDED, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


class Storm:
    """The attacking clients, on an event loop of their own."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.idle: list[asyncio.StreamWriter] = []
        self.slow_answers: list[bytes] = []
        self.slow_closed_after: list[float] = []

    def run(self, coroutine: Any, timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    async def open_idle(self, count: int) -> None:
        gate = asyncio.Semaphore(500)

        async def one() -> None:
            async with gate:
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
                self.idle.append(writer)

        await asyncio.gather(*(one() for _ in range(count)))

    async def slow_headers(self, count: int) -> None:
        async def one() -> None:
            reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
            started = time.monotonic()
            writer.write(b"GET /api/public HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            answer = b""
            with contextlib.suppress(ConnectionError):
                while not reader.at_eof() and time.monotonic() - started < 4 * HEADERS_TIMEOUT:
                    writer.write(b"a")
                    with contextlib.suppress(TimeoutError):
                        answer += await asyncio.wait_for(reader.read(4096), 1.0)
            self.slow_answers.append(answer)
            self.slow_closed_after.append(time.monotonic() - started)
            writer.close()

        await asyncio.gather(*(one() for _ in range(count)))

    async def close_idle(self) -> None:
        for writer in self.idle:
            writer.close()
        self.idle.clear()

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.run(self.close_idle(), timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


class Probe:
    """An API request every 0.2 s on a new connection, timed; the thread count alongside."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self.threads: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            started = time.monotonic()
            try:
                with urllib.request.urlopen(self.url, timeout=10) as answer:
                    answer.read()
                    if answer.status != 200:
                        self.failures.append(str(answer.status))
            except Exception as error:
                self.failures.append(repr(error))
            self.latencies.append(time.monotonic() - started)
            self.threads.append(threading.active_count())

    def __enter__(self) -> Probe:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(15)


def test_a_connection_storm_cannot_freeze_the_host(
    enough_file_descriptors: None,
    run_host: Callable[..., LocalHost],
    servicebus_connection_string: str,
    seen: Any,
) -> None:
    document = json.loads(json.dumps(FAST_HOST_JSON))
    host = run_host(
        ["public", "session_tasks", "every_second"],
        settings={
            "SESSION_QUEUE": QUEUE,
            "ServiceBusConnection": servicebus_connection_string,
            "EVERY_SECOND": "*/1 * * * * *",
        },
        host_json=document,
        http_read_timeout=HEADERS_TIMEOUT,
    )
    wait_for(lambda: seen.of("every_second"), timeout=10, what="the timer")
    baseline_threads = threading.active_count()
    storm = Storm(int(host.http_url.rsplit(":", 1)[1]))
    try:
        with Probe(f"{host.http_url}/api/public") as probe:
            storm.run(storm.open_idle(HALF_OPEN))
            slow = asyncio.run_coroutine_threadsafe(storm.slow_headers(SLOW_HEADERS), storm.loop)
            storm_started = time.monotonic()
            timer_runs = len(seen.of("every_second"))
            wait_for(
                lambda: host._http is not None and host._http.server.open_connections >= HALF_OPEN,
                timeout=20,
                what="the storm's connections accepted",
            )
            with (
                ServiceBusClient.from_connection_string(servicebus_connection_string) as client,
                client.get_queue_sender(QUEUE) as sender,
            ):
                sender.send_messages(
                    [
                        ServiceBusMessage(json.dumps({"n": n}), session_id=f"order-{o}")
                        for o in range(ORDERS)
                        for n in (1, 2)
                    ]
                )
            wait_for(
                lambda: len(seen.of("session_tasks")) >= 2 * ORDERS,
                timeout=60,
                what="every order's messages processed",
            )
            slow.result(timeout=4 * HEADERS_TIMEOUT + 10)
            timer_during = len(seen.of("every_second")) - timer_runs
            storm_seconds = time.monotonic() - storm_started
            storm.run(storm.close_idle())  # all at once
            time.sleep(2)  # the host keeps answering while they close
    finally:
        storm.stop()

    by_session: dict[str, list[int]] = {}
    for call in seen.of("session_tasks"):
        by_session.setdefault(call["session_id"], []).append(call["sequence"])
    assert len(by_session) == ORDERS and all(s == [1, 2] for s in by_session.values())
    assert probe.failures == []
    # A frozen host answered nothing for 15 s and more; on 2 busy cores (the suite's other
    # workers) a probe may wait about a second for its turn
    assert len(probe.latencies) >= 10 and max(probe.latencies) < 3.0, max(probe.latencies)
    assert max(probe.threads) - baseline_threads < 40, (baseline_threads, max(probe.threads))
    assert timer_during >= storm_seconds - 3, (timer_during, storm_seconds)
    # the slow-header clients were cut off by the headers timeout, with a 408
    assert all(a.startswith(b"HTTP/1.1 408 ") for a in storm.slow_answers)
    assert max(storm.slow_closed_after) < HEADERS_TIMEOUT + 3
