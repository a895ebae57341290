"""An invocation that lost its session lock cannot write the session's state or settle its
message, as with Service Bus (SessionLockLost), even when another slot of the same host holds
the session by then: settlement goes through the lock of the invocation that asks."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

from functions_local_host import LocalHost
from local_host_testing import FAST_HOST_JSON, LONG_LOCK_SECONDS, wait_for

pytestmark = pytest.mark.integration

QUEUE = "sessions-stale-writer"
RUNS = 20
LOCK_SECONDS = LONG_LOCK_SECONDS[QUEUE]


@pytest.fixture(scope="module")
def client(servicebus_connection_string: str) -> Iterator[ServiceBusClient]:
    with ServiceBusClient.from_connection_string(servicebus_connection_string) as client:
        yield client


def test_a_writer_whose_lock_was_lost_is_refused_with_session_lock_lost(
    run_host: Callable[..., LocalHost],
    servicebus_connection_string: str,
    client: ServiceBusClient,
    seen: Any,
) -> None:
    """20 sessions at once, each one message whose first delivery sleeps past the session's
    lock (no automatic renewal) and then writes the state. Meanwhile another slot of the same
    host takes the session (the broker hands it over when the lock runs out) and gets the
    message again. The first delivery's write must fail with SessionLockLost every time, and
    the state end as the later delivery wrote it."""
    document = json.loads(json.dumps(FAST_HOST_JSON))
    document["extensions"]["serviceBus"].update(
        maxConcurrentSessions=2 * RUNS, maxAutoLockRenewalDuration="00:00:00"
    )
    run_host(
        ["session_tasks"],
        settings={
            "SESSION_QUEUE": QUEUE,
            "ServiceBusConnection": servicebus_connection_string,
            # every invocation on a thread of its own, so none waits for another's sleep
            "PYTHON_THREADPOOL_THREAD_COUNT": str(2 * RUNS + 4),
        },
        host_json=document,
    )
    command = {"n": 0, "sleep": LOCK_SECONDS + 1.5, "sleep_once": True, "state": "by_delivery"}
    sessions = [f"stale-{n}" for n in range(RUNS)]
    with client.get_queue_sender(QUEUE) as sender:
        sender.send_messages(
            [ServiceBusMessage(json.dumps(command), session_id=s, message_id=s) for s in sessions]
        )

    def finished() -> dict[str, list[dict[str, Any]]] | None:
        calls = seen.of("session_tasks")
        by_session = {s: [c for c in calls if c["session_id"] == s] for s in sessions}
        done = all(
            any("state_written" in c for c in each) and any(c["delivery"] == 1 for c in each)
            for each in by_session.values()
        )
        return by_session if done else None

    by_session = wait_for(finished, timeout=60, what="a later delivery of every session")

    refused = []
    for session_id, calls in by_session.items():
        first = next(c for c in calls if c["delivery"] == 1)
        assert "state_written" not in first, f"{session_id}: the stale write went through"
        refused.append(first.get("state_error", ""))
    assert [e for e in refused if "SessionLockLost" in e] == refused

    def state_and_left(session_id: str) -> tuple[bytes | None, int]:
        with client.get_queue_receiver(QUEUE, session_id=session_id, max_wait_time=2) as receiver:
            return receiver.session.get_state(), len(receiver.peek_messages(max_message_count=1))

    with ThreadPoolExecutor(RUNS) as pool:  # a session receiver each, opened at once
        ends = dict(zip(sessions, pool.map(state_and_left, sessions), strict=True))
    for session_id, (state, left) in ends.items():
        written = [c["state_written"] for c in by_session[session_id] if "state_written" in c]
        assert state is not None and state.decode() == written[-1] != "delivery 1"
        assert left == 0
    assert len(refused) == RUNS
    with client.get_queue_receiver(
        QUEUE, sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=1
    ) as dead_letters:
        assert dead_letters.peek_messages(max_message_count=1) == []
