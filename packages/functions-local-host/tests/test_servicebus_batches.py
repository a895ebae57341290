"""Batch triggers (cardinality many) on the emulator, as the Service Bus extension runs them
(ServiceBusListener.RunBatchReceiveLoopAsync): up to maxMessageBatchSize messages of one
session per invocation, in order; minMessageBatchSize held back until maxBatchWaitTime; each
message settled on its own (what the function settled is left alone, the rest completed after
a success and abandoned after a failure); locks left unrenewed by the host (the extension's
batch loop renews none), while the function can renew them itself through the Settlement
service."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

from functions_local_host import LocalHost
from local_host_testing import FAST_HOST_JSON, LOCK_DURATION_SECONDS, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def client(servicebus_connection_string: str) -> Iterator[ServiceBusClient]:
    with ServiceBusClient.from_connection_string(servicebus_connection_string) as client:
        yield client


@pytest.fixture
def start(
    run_host: Callable[..., LocalHost], servicebus_connection_string: str
) -> Callable[..., LocalHost]:
    def start_host(function: str, queue: str, **service_bus: Any) -> LocalHost:
        document = json.loads(json.dumps(FAST_HOST_JSON))
        document["extensions"]["serviceBus"].update(service_bus)
        setting = {"session_batches": "SESSION_BATCH_QUEUE", "plain_batches": "PLAIN_BATCH_QUEUE"}
        return run_host(
            [function],
            settings={
                setting[function]: queue,
                "ServiceBusConnection": servicebus_connection_string,
            },
            host_json=document,
        )

    return start_host


def send(
    client: ServiceBusClient, queue: str, *commands: dict[str, Any], session_id: str | None = None
) -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(
            [
                ServiceBusMessage(json.dumps(c), session_id=session_id, message_id=f"m{c['n']}")
                for c in commands
            ]
        )


def batches_until(seen: Any, function: str, count: int) -> list[dict[str, Any]]:
    """The batches of ``function`` once they hold ``count`` messages in all."""
    return wait_for(
        lambda: sum(len(b["sequence"]) for b in seen.of(function)) >= count and seen.of(function),
        timeout=20,
        what=f"{count} messages in batches",
    )


def left_on(client: ServiceBusClient, queue: str, *, session_id: str | None = None) -> int:
    receiver = (
        client.get_queue_receiver(queue, session_id=session_id, max_wait_time=1)
        if session_id
        else client.get_queue_receiver(queue, max_wait_time=1)
    )
    with receiver:
        return len(receiver.peek_messages(max_message_count=50))


def test_a_session_comes_in_batches_in_order_up_to_max_message_batch_size(
    start: Callable[..., LocalHost], client: ServiceBusClient, seen: Any
) -> None:
    start("session_batches", "sessions-batch", maxMessageBatchSize=3)

    send(client, "sessions-batch", *({"n": n} for n in range(1, 8)), session_id="s1")

    batches = batches_until(seen, "session_batches", 7)
    assert [n for b in batches for n in b["sequence"]] == list(range(1, 8))
    assert all(1 <= len(b["sequence"]) <= 3 for b in batches)
    assert {s for b in batches for s in b["session_ids"]} == {"s1"}
    wait_for(lambda: left_on(client, "sessions-batch", session_id="s1") == 0, timeout=10)


def test_min_message_batch_size_holds_messages_until_max_batch_wait_time(
    start: Callable[..., LocalHost], client: ServiceBusClient, seen: Any
) -> None:
    start(
        "session_batches",
        "sessions-batch-min",
        minMessageBatchSize=5,
        maxBatchWaitTime="00:00:01",
        sessionIdleTimeout="00:00:10",
    )

    send(client, "sessions-batch-min", {"n": 1}, {"n": 2}, session_id="s1")

    # fewer than the minimum: one batch of both once the wait is over, not one per message
    (batch,) = batches_until(seen, "session_batches", 2)
    assert batch["sequence"] == [1, 2]


def test_a_failed_batch_abandons_only_what_the_function_left_unsettled(
    start: Callable[..., LocalHost], client: ServiceBusClient, seen: Any
) -> None:
    start("session_batches", "sessions-batch-fail", maxMessageBatchSize=10, minMessageBatchSize=2)

    send(
        client,
        "sessions-batch-fail",
        {"n": 1, "settle": "deadletter"},
        {"n": 2, "fail_once": True},
        session_id="s1",
    )

    batches = batches_until(seen, "session_batches", 3)
    assert [b["sequence"] for b in batches] == [[1, 2], [2]]  # 2 abandoned, then completed
    with client.get_queue_receiver(
        "sessions-batch-fail", sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=2
    ) as dead_letters:
        (dead,) = dead_letters.receive_messages(max_message_count=5)
        assert (dead.message_id, dead.dead_letter_reason) == ("m1", "Asked")
        dead_letters.complete_message(dead)
    wait_for(lambda: left_on(client, "sessions-batch-fail", session_id="s1") == 0, timeout=10)


@pytest.mark.parametrize(
    ("function", "queue", "renew"),
    [
        ("session_batches", "sessions-batch-renew", True),
        ("session_batches", "sessions-batch-no-renewal", False),
        ("plain_batches", "plain-batch-renew", True),
        ("plain_batches", "plain-batch-no-renewal", False),
    ],
)
def test_the_host_renews_no_batch_lock_and_the_function_can(
    start: Callable[..., LocalHost],
    client: ServiceBusClient,
    seen: Any,
    function: str,
    queue: str,
    renew: bool,
) -> None:
    """A batch that runs 2.5 lock durations (the queue locks for 2 s) with automatic renewal
    on in host.json: the host renews neither the session's lock nor the messages' (as in
    Azure), so without renewals from the function the batch is delivered again (the control);
    with renew_session_lock (or renew_message_lock) every 0.5 s it is completed once, and each
    RenewSessionLock answers the session's new locked-until."""
    command: dict[str, Any] = {"n": 1, "sleep": 2.5 * LOCK_DURATION_SECONDS, "sleep_once": True}
    if renew:
        command["renew_every"] = 0.5
    session_id = "renew" if function == "session_batches" else None
    start(function, queue, maxMessageBatchSize=2, maxAutoLockRenewalDuration="00:05:00")

    send(client, queue, command, session_id=session_id)

    if not renew:
        first, again = wait_for(
            lambda: len(seen.of(function)) >= 2 and seen.of(function)[:2],
            timeout=20,
            what="the batch delivered again after its lock ran out",
        )
        assert first["message_ids"] == again["message_ids"] == ["m1"]
        return
    (batch,) = batches_until(seen, function, 1)
    wait_for(lambda: left_on(client, queue, session_id=session_id) == 0, timeout=10)
    assert batch["renew_errors"] == []
    assert len(batch["renewed"]) >= 4
    if session_id:  # each renewal answered the lock's new end, later each time
        renewed = batch["renewed"]
        assert renewed == sorted(set(renewed))
        assert renewed[-1] - renewed[0] >= timedelta(seconds=1.5)
    time.sleep(LOCK_DURATION_SECONDS + 1)
    assert len(seen.of(function)) == 1, "the batch was delivered again"


def test_a_plain_queue_comes_in_batches_up_to_max_message_batch_size(
    start: Callable[..., LocalHost], client: ServiceBusClient, seen: Any
) -> None:
    start("plain_batches", "plain-batch", maxMessageBatchSize=2)

    send(client, "plain-batch", *({"n": n} for n in range(1, 6)))

    batches = batches_until(seen, "plain_batches", 5)
    assert sorted(n for b in batches for n in b["sequence"]) == [1, 2, 3, 4, 5]
    assert all(1 <= len(b["sequence"]) <= 2 for b in batches)
    wait_for(lambda: left_on(client, "plain-batch") == 0, timeout=10)
