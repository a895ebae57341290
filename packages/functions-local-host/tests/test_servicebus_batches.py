"""Batch triggers (cardinality many) on the emulator, as the Service Bus extension runs them
(ServiceBusListener.RunBatchReceiveLoopAsync): up to maxMessageBatchSize messages of one
session per invocation, in order; minMessageBatchSize held back until maxBatchWaitTime; each
message settled on its own (what the function settled is left alone, the rest completed after
a success and abandoned after a failure); locks kept while the batch runs."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

from functions_local_host import LocalHost
from local_host_testing import FAST_HOST_JSON, wait_for

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


def test_a_plain_queue_batch_keeps_its_locks_while_it_runs(
    start: Callable[..., LocalHost], client: ServiceBusClient, seen: Any
) -> None:
    # The queue locks for 2 s; the batch runs for 3 s.
    start("plain_batches", "plain-batch-renewal", maxMessageBatchSize=2, minMessageBatchSize=2)

    send(client, "plain-batch-renewal", {"n": 1, "sleep": 3}, {"n": 2})

    (batch,) = batches_until(seen, "plain_batches", 2)
    assert sorted(batch["sequence"]) == [1, 2]
    wait_for(lambda: left_on(client, "plain-batch-renewal") == 0, timeout=10)
    assert len(seen.of("plain_batches")) == 1  # completed, not redelivered


def test_a_plain_queue_comes_in_batches_up_to_max_message_batch_size(
    start: Callable[..., LocalHost], client: ServiceBusClient, seen: Any
) -> None:
    start("plain_batches", "plain-batch", maxMessageBatchSize=2)

    send(client, "plain-batch", *({"n": n} for n in range(1, 6)))

    batches = batches_until(seen, "plain_batches", 5)
    assert sorted(n for b in batches for n in b["sequence"]) == [1, 2, 3, 4, 5]
    assert all(1 <= len(b["sequence"]) <= 2 for b in batches)
    wait_for(lambda: left_on(client, "plain-batch") == 0, timeout=10)
