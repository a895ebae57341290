"""Service Bus triggers on the emulator: session concurrency and order, lock renewal,
autoComplete, abandon on failure, settlement and session state through
ServiceBusMessageActions."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from azure.servicebus import (
    NEXT_AVAILABLE_SESSION,
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusSubQueue,
)
from azure.servicebus.exceptions import OperationTimeoutError

from localdev.host import LocalHost

from .conftest import FAST_HOST_JSON, LOCK_DURATION_SECONDS, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def client(servicebus_connection_string: str) -> Iterator[ServiceBusClient]:
    with ServiceBusClient.from_connection_string(servicebus_connection_string) as client:
        yield client


def send(
    client: ServiceBusClient, queue: str, *commands: dict[str, Any], session_id: str | None = None
) -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(
            [ServiceBusMessage(json.dumps(c), session_id=session_id) for c in commands]
        )


def no_session_has_messages(client: ServiceBusClient, queue: str) -> bool:
    try:
        with client.get_queue_receiver(
            queue, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=1
        ) as receiver:
            return not receiver.peek_messages(max_message_count=1)
    except OperationTimeoutError:
        return True


def host_json(**service_bus: Any) -> dict[str, Any]:
    document = json.loads(json.dumps(FAST_HOST_JSON))
    document["extensions"]["serviceBus"].update(service_bus)
    return document


@pytest.fixture
def start(
    run_host: Callable[..., LocalHost], servicebus_connection_string: str
) -> Callable[..., LocalHost]:
    def start_host(function: str, queue: str, **service_bus: Any) -> LocalHost:
        setting = {
            "session_tasks": "SESSION_QUEUE",
            "manual_session_tasks": "MANUAL_SESSION_QUEUE",
            "plain_tasks": "PLAIN_QUEUE",
        }[function]
        return run_host(
            [function],
            settings={setting: queue, "ServiceBusConnection": servicebus_connection_string},
            host_json=host_json(**service_bus),
        )

    return start_host


def test_no_more_sessions_at_once_than_max_concurrent_sessions(
    start: Callable[..., LocalHost], client: ServiceBusClient, seen: Any
) -> None:
    for session in "abcd":
        send(
            client,
            "sessions-concurrency",
            {"n": 0, "sleep": 0.4},
            {"n": 1, "sleep": 0.4},
            session_id=session,
        )
    start("session_tasks", "sessions-concurrency", maxConcurrentSessions=2)
    wait_for(lambda: len(seen.of("session_tasks")) == 8, timeout=20, what="8 invocations")
    assert seen.max_in_flight == 2
    assert {c["session_id"] for c in seen.of("session_tasks")} == set("abcd")


def test_a_session_runs_one_message_at_a_time_in_order(
    start: Callable[..., LocalHost], client: ServiceBusClient, seen: Any
) -> None:
    for session in ("s1", "s2", "s3"):
        send(
            client,
            "sessions-order",
            *({"n": n, "sleep": 0.05} for n in range(6)),
            session_id=session,
        )
    start("session_tasks", "sessions-order")
    wait_for(lambda: len(seen.of("session_tasks")) == 18, timeout=20, what="18 invocations")
    for session in ("s1", "s2", "s3"):
        calls = sorted(
            (c for c in seen.of("session_tasks") if c["session_id"] == session),
            key=lambda c: c["started"],
        )
        assert [c["sequence"] for c in calls] == list(range(6))
        for before, after in itertools.pairwise(calls):
            assert after["started"] >= before["at"], "two messages of a session overlapped"
    assert seen.max_in_flight > 1, "sessions should run in parallel"


def test_the_lock_is_renewed_while_a_task_outlasts_it(
    start: Callable[..., LocalHost], client: ServiceBusClient, seen: Any
) -> None:
    slow = 2 * LOCK_DURATION_SECONDS + 1
    send(
        client, "sessions-renewal", {"n": 0, "sleep": slow, "settle": "complete"}, session_id="long"
    )
    start("session_tasks", "sessions-renewal")
    (call,) = wait_for(lambda: seen.of("session_tasks"), timeout=slow + 10, what="the task")
    assert "raised" not in call
    time.sleep(LOCK_DURATION_SECONDS + 1)
    assert len(seen.of("session_tasks")) == 1, "the message was delivered again"
    assert no_session_has_messages(client, "sessions-renewal")


def test_an_exception_abandons_and_the_message_comes_back(
    start: Callable[..., LocalHost], client: ServiceBusClient, seen: Any
) -> None:
    send(client, "sessions-abandon", {"n": 0, "fail_times": 2}, {"n": 1}, session_id="x")
    start("session_tasks", "sessions-abandon")
    calls = wait_for(
        lambda: len(seen.of("session_tasks")) == 4 and seen.of("session_tasks"),
        timeout=15,
        what="two failures, a success and the next message",
    )
    assert [c["sequence"] for c in calls] == [0, 0, 0, 1]
    first = calls[0]["delivery_count"]
    assert [c["delivery_count"] for c in calls[:3]] == [first, first + 1, first + 2]
    assert [bool(c.get("raised")) for c in calls] == [True, True, False, False]
    wait_for(lambda: no_session_has_messages(client, "sessions-abandon"), what="empty queue")


def test_auto_complete_completes_unless_the_function_settled(
    start: Callable[..., LocalHost], client: ServiceBusClient, seen: Any
) -> None:
    send(
        client,
        "sessions-autocomplete",
        {"n": 0},
        {"n": 1, "settle": "deadletter"},
        {"n": 2, "settle": "complete_twice"},
        session_id="auto",
    )
    start("session_tasks", "sessions-autocomplete")
    calls = wait_for(
        lambda: len(seen.of("session_tasks")) == 3 and seen.of("session_tasks"),
        timeout=15,
        what="three invocations",
    )
    # Settling twice fails the way it does in Azure: a SettlementError from the gRPC call.
    assert calls[2]["second_complete"].startswith("SettlementError")
    time.sleep(LOCK_DURATION_SECONDS + 1)
    assert len(seen.of("session_tasks")) == 3
    assert no_session_has_messages(client, "sessions-autocomplete")
    with client.get_queue_receiver(
        "sessions-autocomplete", sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=2
    ) as dead_letters:
        (dead,) = dead_letters.receive_messages(max_message_count=5, max_wait_time=2)
        assert (dead.dead_letter_reason, dead.dead_letter_error_description) == (
            "TestReason",
            "because",
        )
        dead_letters.complete_message(dead)


def test_without_auto_complete_an_unsettled_message_comes_back(
    start: Callable[..., LocalHost], client: ServiceBusClient, seen: Any
) -> None:
    send(client, "sessions-manual", {"n": 0}, session_id="m1")
    send(client, "sessions-manual", {"n": 0, "settle": "complete"}, session_id="m2")
    start("manual_session_tasks", "sessions-manual")
    wait_for(
        lambda: len([c for c in seen.of("manual_session_tasks") if c["session_id"] == "m1"]) >= 2,
        timeout=20,
        what="the unsettled message delivered again",
    )
    assert len([c for c in seen.of("manual_session_tasks") if c["session_id"] == "m2"]) == 1


def test_session_state_is_set_read_and_cleared_through_message_actions(
    start: Callable[..., LocalHost], client: ServiceBusClient, seen: Any
) -> None:
    send(
        client,
        "sessions-state",
        {"n": 0, "state": "step-1"},
        {"n": 1, "state": "get"},
        {"n": 2, "state": "clear"},
        {"n": 3, "state": "get"},
        session_id="st",
    )
    start("session_tasks", "sessions-state")
    calls = wait_for(
        lambda: len(seen.of("session_tasks")) == 4 and seen.of("session_tasks"),
        timeout=15,
        what="four invocations",
    )
    assert [c.get("state") for c in calls] == [None, b"step-1", None, b""]
    with client.get_queue_receiver("sessions-state", session_id="st", max_wait_time=1) as r:
        assert not r.session.get_state()


def test_a_plain_queue_message_is_passed_as_the_sdk_type_and_completed(
    start: Callable[..., LocalHost], client: ServiceBusClient, seen: Any
) -> None:
    send(
        client,
        "plain-tasks",
        {"n": 0, "sleep": 2 * LOCK_DURATION_SECONDS + 1},
        {"n": 1, "fail_times": 1},
    )
    start("plain_tasks", "plain-tasks", maxConcurrentCalls=2)
    wait_for(lambda: len(seen.of("plain_tasks")) == 3, timeout=20, what="three invocations")
    time.sleep(LOCK_DURATION_SECONDS + 1)
    calls = seen.of("plain_tasks")
    assert sorted(c["sequence"] for c in calls) == [0, 1, 1]
    assert {c["type"] for c in calls} == {"ServiceBusReceivedMessage"}
    with client.get_queue_receiver("plain-tasks", max_wait_time=1) as receiver:
        assert not receiver.peek_messages(max_message_count=1)


def test_no_more_plain_messages_at_once_than_max_concurrent_calls(
    start: Callable[..., LocalHost], client: ServiceBusClient, seen: Any
) -> None:
    send(client, "plain-concurrency", *({"n": n, "sleep": 1} for n in range(6)))
    start("plain_tasks", "plain-concurrency", maxConcurrentCalls=2)
    wait_for(lambda: len(seen.of("plain_tasks")) == 6, timeout=20, what="six invocations")
    # Two at a time: neither the limit ignored (up to 6) nor the calls run one by one.
    assert seen.max_in_flight == 2
    assert sorted(c["sequence"] for c in seen.of("plain_tasks")) == list(range(6))
    with client.get_queue_receiver("plain-concurrency", max_wait_time=1) as receiver:
        assert not receiver.peek_messages(max_message_count=1)
