"""A timer across a failover and a storage outage, on Azurite: the schedule's status in
storage (useMonitor) makes an occurrence that no instance ran run past due on the instance
that takes the singleton lock next; a lock lost while storage was unreachable is sought again
until it is taken."""

from __future__ import annotations

import contextlib
import logging
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from azure.storage.blob import BlobLeaseClient, BlobServiceClient

from functions_local_host import LocalHost
from functions_local_host.schedule_monitor import ScheduleStatus
from functions_local_host.singleton import HOSTS_CONTAINER, listener_lock_id
from functions_local_host.timers import Schedule
from local_host_testing import wait_for

pytestmark = pytest.mark.integration

LEASE_SECONDS = 15  # the shortest blob lease
FAST_LOCKS = {
    "version": "2.0",
    "singleton": {
        "listenerLockPeriod": f"00:00:{LEASE_SECONDS}",
        "listenerLockRecoveryPollingInterval": "00:00:01",
    },
}


def start_monitored(
    run_host: Callable[..., LocalHost], storage: str, schedule: str
) -> tuple[LocalHost, str]:
    """A host running the ``monitored`` timer (useMonitor) under a host id of its own."""
    host_id = f"timer-{uuid.uuid4().hex[:12]}"
    host = run_host(
        ["monitored"],
        settings={
            "AzureWebJobsStorage": storage,
            "MONITORED_SCHEDULE": schedule,
            "AzureFunctionsWebHost__hostid": host_id,
        },
        host_json=FAST_LOCKS,
    )
    return host, host_id


def test_an_occurrence_missed_in_a_failover_runs_past_due_on_the_instance_that_takes_over(
    run_host: Callable[..., LocalHost],
    azurite_connection_string: str,
    seen: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Another instance ran the once-a-minute timer, recorded its next occurrence, and died
    holding the lock; that occurrence passed with no instance running the timer. This
    instance waits for the dead one's lease to run out, takes the lock, and runs the missed
    occurrence at once, past due, before its schedule goes on."""
    caplog.set_level(logging.INFO)
    host_id = f"timer-{uuid.uuid4().hex[:12]}"
    schedule = Schedule("0 * * * * *")
    now = datetime.now(UTC)
    missed = now.replace(second=0, microsecond=0)  # passed, never run
    last = missed - timedelta(minutes=1)
    container = BlobServiceClient.from_connection_string(
        azurite_connection_string
    ).get_container_client(HOSTS_CONTAINER)
    if not container.exists():
        container.create_container()
    status_blob = container.get_blob_client(f"timers/{host_id}/Host.Functions.monitored/status")
    status_blob.upload_blob(
        ScheduleStatus(last=last, next=schedule.next_after(last), last_updated=last).as_json()
    )
    lock_blob = container.get_blob_client(f"locks/{listener_lock_id(host_id, 'monitored')}")
    lock_blob.upload_blob(b"")
    BlobLeaseClient(lock_blob).acquire(lease_duration=LEASE_SECONDS)  # the dead instance's
    held_until = time.monotonic() + LEASE_SECONDS

    run_host(
        ["monitored"],
        settings={
            "AzureWebJobsStorage": azurite_connection_string,
            "MONITORED_SCHEDULE": "0 * * * * *",
            "AzureFunctionsWebHost__hostid": host_id,
        },
        host_json=FAST_LOCKS,
    )

    [first] = wait_for(
        lambda: seen.of("monitored"), timeout=LEASE_SECONDS + 15, what="the missed occurrence"
    )
    assert time.monotonic() >= held_until - 1, "ran while the dead instance held the lock"
    assert first["past_due"] is True
    assert f"OriginalSchedule: {missed.isoformat()}" in caplog.text
    assert "Function 'monitored' is past due on startup. Executing now." in caplog.text
    recorded = ScheduleStatus.from_json(status_blob.download_blob().readall().decode())
    assert recorded.last > missed and recorded.next == schedule.next_after(recorded.last)


class Outage:
    """A TCP proxy on 127.0.0.1 in front of ``target``: ``cut()`` drops its connections and
    refuses new ones (storage unreachable), ``restore()`` lets them through again."""

    def __init__(self, target: tuple[str, int]) -> None:
        self._target = target
        self._open: set[socket.socket] = set()
        self._guard = threading.Lock()
        self._up = threading.Event()
        self._up.set()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        self._listener.settimeout(0.2)
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            if not self._up.is_set():
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
                client.close()  # a reset: unreachable
                continue
            upstream = socket.create_connection(self._target)
            with self._guard:
                self._open.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with self._guard:
                    self._open.discard(end)
                with contextlib.suppress(OSError):
                    end.close()

    def cut(self) -> None:
        self._up.clear()
        with self._guard:
            ends, self._open = list(self._open), set()
        for end in ends:
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def restore(self) -> None:
        self._up.set()

    def close(self) -> None:
        self._stop.set()
        self.cut()
        self._listener.close()


@pytest.fixture
def outage(azurite_connection_string: str) -> Iterator[tuple[Outage, str]]:
    """An outage switch on Azurite's blob endpoint, and a connection string through it."""
    found = re.search(r"BlobEndpoint=http://127\.0\.0\.1:(\d+)/", azurite_connection_string)
    assert found is not None
    blob_port = int(found[1])
    proxy = Outage(("127.0.0.1", blob_port))
    through = azurite_connection_string.replace(f":{blob_port}/", f":{proxy.port}/")
    try:
        yield proxy, through
    finally:
        proxy.close()


def test_a_lock_lost_in_a_storage_outage_is_taken_again_and_the_missed_runs_made_up(
    run_host: Callable[..., LocalHost],
    outage: tuple[Outage, str],
    seen: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    proxy, storage = outage
    start_monitored(run_host, storage, "*/2 * * * * *")
    wait_for(lambda: len(seen.of("monitored")) >= 2, timeout=15, what="the timer running")

    proxy.cut()
    wait_for(
        lambda: "Singleton lock lost" in caplog.text,
        timeout=LEASE_SECONDS + 10,
        what="the lease to run out unrenewed",
    )
    runs_when_lost = len(seen.of("monitored"))
    time.sleep(3)  # occurrences pass with nobody running the timer
    assert len(seen.of("monitored")) == runs_when_lost
    proxy.restore()
    restored = time.monotonic()

    after = wait_for(
        lambda: seen.of("monitored")[runs_when_lost:], timeout=15, what="the timer back"
    )
    assert time.monotonic() - restored < 10
    assert after[0]["past_due"] is True  # the occurrences missed in the outage, made up once
    acquired = [r for r in caplog.records if r.getMessage().startswith("Singleton lock acquired")]
    assert len(acquired) == 2
