"""Service Bus triggers on the emulator: session concurrency and order, lock renewal,
autoComplete, abandon on failure, settlement and session state through
ServiceBusMessageActions."""

from __future__ import annotations

import itertools
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from azure.servicebus import (
    NEXT_AVAILABLE_SESSION,
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusSubQueue,
)
from azure.servicebus.exceptions import OperationTimeoutError, ServiceBusError

from functions_local_host import LocalHost
from local_host_testing import FAST_HOST_JSON, LOCK_DURATION_SECONDS, LONG_LOCK_SECONDS, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def client(servicebus_connection_string: str) -> Iterator[ServiceBusClient]:
    with ServiceBusClient.from_connection_string(servicebus_connection_string) as client:
        yield client


@pytest.fixture(scope="module")
def quick_client(servicebus_connection_string: str) -> Iterator[ServiceBusClient]:
    """Without retries: the SDK takes "no session within max_wait_time" for a transient error
    and tries 3 more times with backoff (~19 s for a 1 s wait in no_session_has_messages)."""
    with ServiceBusClient.from_connection_string(
        servicebus_connection_string, retry_total=0
    ) as client:
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


def delivery_counts(caplog: pytest.LogCaptureFixture, message_id: str) -> list[int]:
    """The delivery counts the host logged for ``message_id``, in order. The worker does not
    pass the count to the function (Azure's does not either); the host's Trigger Details do."""
    pattern = rf"MessageId: {re.escape(message_id)}, SequenceNumber: \S+, DeliveryCount: (\d+)"
    return [int(count) for count in re.findall(pattern, caplog.text)]


def calls_of(
    seen: Any, function: str, count: int, *, what: str, timeout: float = 15
) -> list[dict[str, Any]]:
    """The calls of ``function``, once there are ``count`` of them (``what`` says which)."""
    return wait_for(
        lambda: len(seen.of(function)) == count and seen.of(function), timeout=timeout, what=what
    )


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


@pytest.mark.parametrize(
    ("thread_count", "at_once"),
    [
        # Unset: the pool Azure gives a one-vCPU instance (min(32, 1 + 4) threads), whatever
        # this machine's CPUs; three of the eight sessions wait for a thread.
        (None, 5),
        # What infra sets (infra/app/function.bicep): every session gets a thread.
        ("20", 8),
    ],
)
def test_eight_slow_sessions_run_at_once_only_when_the_worker_has_threads_for_them(
    start: Callable[..., LocalHost],
    client: ServiceBusClient,
    seen: Any,
    monkeypatch: pytest.MonkeyPatch,
    thread_count: str | None,
    at_once: int,
) -> None:
    monkeypatch.delenv("PYTHON_THREADPOOL_THREAD_COUNT", raising=False)
    if thread_count is not None:
        monkeypatch.setenv("PYTHON_THREADPOOL_THREAD_COUNT", thread_count)
    for n in range(8):
        # Each blocks until all eight run at once (or 5 s pass): a synchronous task holding
        # its thread, as Storage, SMTP and PDF calls do.
        send(client, "sessions-threads", {"n": 0, "gather": 8}, session_id=f"slow-{n}")

    start("session_tasks", "sessions-threads", maxConcurrentSessions=8)
    calls_of(seen, "session_tasks", 8, what="the eight sessions", timeout=60)

    assert seen.max_in_flight == at_once


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
    start: Callable[..., LocalHost],
    client: ServiceBusClient,
    seen: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    send(client, "sessions-abandon", {"n": 0, "fail_times": 2}, {"n": 1}, session_id="x")
    start("session_tasks", "sessions-abandon")
    calls = calls_of(seen, "session_tasks", 4, what="two failures, a success and the next message")
    assert [c["sequence"] for c in calls] == [0, 0, 0, 1]
    counts = delivery_counts(caplog, calls[0]["message_id"])
    assert counts == [counts[0], counts[0] + 1, counts[0] + 2]
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
    calls = calls_of(seen, "session_tasks", 3, what="three invocations")
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
    calls = calls_of(seen, "session_tasks", 4, what="four invocations")
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


# -- the rest of ServiceBusMessageActions, and the host.json settlement options -----------------


def queue_is_empty(client: ServiceBusClient, queue: str) -> bool:
    with client.get_queue_receiver(queue, max_wait_time=1) as receiver:
        return not receiver.peek_messages(max_message_count=1)


def test_abandon_from_the_function_brings_the_message_back_at_once(
    start: Callable[..., LocalHost],
    client: ServiceBusClient,
    seen: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    lock = timedelta(seconds=LONG_LOCK_SECONDS["plain-abandon"])
    send(client, "plain-abandon", {"n": 0, "settle": "abandon", "settle_times": 1})
    start("plain_tasks", "plain-abandon", maxConcurrentCalls=1)
    first, second = calls_of(seen, "plain_tasks", 2, what="the abandoned message delivered again")
    counts = delivery_counts(caplog, first["message_id"])
    assert counts[1] == counts[0] + 1
    # Abandoned, not left to its lock: by the broker's clock, the second delivery was locked
    # before the first delivery's lock ran out.
    assert second["locked_until"] - lock < first["locked_until"]
    # The second delivery was auto-completed: the queue empties, with no third delivery.
    wait_for(lambda: queue_is_empty(client, "plain-abandon"), what="the message completed")
    assert len(seen.of("plain_tasks")) == 2


def test_defer_from_the_function_leaves_the_message_deferred(
    start: Callable[..., LocalHost], client: ServiceBusClient, seen: Any
) -> None:
    send(client, "plain-defer", {"n": 0, "settle": "defer"})
    start("plain_tasks", "plain-defer")
    (call,) = wait_for(lambda: seen.of("plain_tasks"), timeout=15, what="the invocation")
    time.sleep(LOCK_DURATION_SECONDS + 1)
    assert len(seen.of("plain_tasks")) == 1, "a deferred message was delivered again"
    with client.get_queue_receiver("plain-defer", max_wait_time=1) as receiver:
        (peeked,) = receiver.peek_messages(max_message_count=5)
        assert peeked.state.name == "DEFERRED"
        (deferred,) = receiver.receive_deferred_messages([call["sequence_number"]])
        assert json.loads(str(deferred)) == {"n": 0, "settle": "defer"}
        receiver.complete_message(deferred)
    assert queue_is_empty(client, "plain-defer")


@pytest.mark.parametrize(
    ("function", "queue", "renew"),
    [
        ("plain_tasks", "plain-renew-lock", True),
        ("plain_tasks", "plain-no-renewal", False),
        ("session_tasks", "sessions-renew-lock", True),
        ("session_tasks", "sessions-no-renewal", False),
    ],
)
def test_the_function_keeps_its_lock_with_renew_lock_when_auto_renewal_is_off(
    start: Callable[..., LocalHost],
    client: ServiceBusClient,
    seen: Any,
    function: str,
    queue: str,
    renew: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """renew_message_lock (plain queue) or renew_session_lock (session) every 0.5 s keeps a
    message whose function runs 2.5 lock durations; without them (the control), the lock runs
    out and the message is delivered again, so automatic renewal really is off."""
    command: dict[str, Any] = {"n": 0, "sleep": 2.5 * LOCK_DURATION_SECONDS}
    if renew:
        command["renew_every"] = 0.5
    sessions = function == "session_tasks"
    send(client, queue, command, session_id="renew" if sessions else None)
    start(
        function,
        queue,
        maxAutoLockRenewalDuration="00:00:00",
        maxConcurrentCalls=2,
        maxConcurrentSessions=2,
    )
    if not renew:
        first, _ = wait_for(
            lambda: len(seen.of(function)) >= 2 and seen.of(function)[:2],
            timeout=20,
            what="the message delivered again after its lock ran out",
        )
        counts = delivery_counts(caplog, first["message_id"])
        assert counts[1] == counts[0] + 1
        return
    (call,) = wait_for(lambda: seen.of(function), timeout=20, what="the invocation")
    assert "renew_errors" not in call
    assert call["renewals"] >= 4
    time.sleep(LOCK_DURATION_SECONDS + 1)
    assert len(seen.of(function)) == 1, "the message was delivered again"
    if sessions:
        assert no_session_has_messages(client, queue)
    else:
        assert queue_is_empty(client, queue)


@pytest.mark.parametrize(
    ("queue", "release"), [("sessions-release", True), ("sessions-no-release", False)]
)
def test_release_session_frees_the_session_when_the_invocation_ends(
    start: Callable[..., LocalHost],
    client: ServiceBusClient,
    seen: Any,
    queue: str,
    release: bool,
) -> None:
    """The host's promise: after release_session, the invocation's message is still settled as
    usual (auto-completed here) and, once the invocation ends, the host closes its session
    receiver instead of waiting sessionIdleTimeout for more messages; any receiver can then
    accept the session, and the host takes it again for a later message. Without release
    (the control) the host keeps the session for sessionIdleTimeout (30 s). These queues lock
    for 20 s: with a 2 s lock an idle session's lock runs out in the host (AutoLockRenewer
    renews 0.75 s before expiry, and the renewal waits behind the idle receive)."""
    send(client, queue, {"n": 0, "release": release}, session_id="r")
    start("session_tasks", queue, sessionIdleTimeout="00:00:30", maxConcurrentSessions=1)
    wait_for(lambda: seen.of("session_tasks"), timeout=15, what="the invocation")

    def accept() -> bool:
        try:
            with client.get_queue_receiver(queue, session_id="r", max_wait_time=1) as receiver:
                assert not receiver.peek_messages(max_message_count=1), "not completed"
                return True
        except ServiceBusError:
            return False

    if not release:
        time.sleep(3)
        assert not accept(), "the host let go of a session it was not told to release"
        return
    wait_for(accept, timeout=5, what="the released session accepted by another receiver")
    send(client, queue, {"n": 1}, session_id="r")
    calls = calls_of(seen, "session_tasks", 2, what="the host taking the session again")
    assert [c["sequence"] for c in calls] == [0, 1]
    wait_for(lambda: no_session_has_messages(client, queue), what="the second message completed")


def test_host_wide_auto_complete_off_leaves_an_unsettled_message_to_its_lock(
    start: Callable[..., LocalHost],
    client: ServiceBusClient,
    seen: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """As in the Functions host (the SDK processor with AutoCompleteMessages=false): a message
    the function did not settle is neither completed nor abandoned, and its lock is no longer
    renewed once the function returned, so it comes back when its lock runs out (6 s here),
    not after maxAutoLockRenewalDuration (1 minute)."""
    lock = LONG_LOCK_SECONDS["plain-manual"]
    send(client, "plain-manual", {"n": 0}, {"n": 1, "settle": "complete"})
    start("plain_tasks", "plain-manual", autoCompleteMessages=False, maxConcurrentCalls=2)
    unsettled = wait_for(
        lambda: (
            len(calls := [c for c in seen.of("plain_tasks") if c["sequence"] == 0]) >= 2 and calls
        ),
        timeout=lock + 15,
        what="the unsettled message delivered again",
    )
    first, second = unsettled[:2]
    counts = delivery_counts(caplog, first["message_id"])
    assert counts[1] == counts[0] + 1
    # Left to its lock, by the broker's clock: locked again only once the first delivery's lock
    # ran out (not abandoned), and within one more lock duration of it (renewal going on
    # after the function returned would have held it for up to a minute).
    again = second["locked_until"] - timedelta(seconds=lock)
    assert first["locked_until"] <= again < first["locked_until"] + timedelta(seconds=lock)
    assert len([c for c in seen.of("plain_tasks") if c["sequence"] == 1]) == 1


def test_automatic_renewal_stops_at_max_auto_lock_renewal_duration(
    start: Callable[..., LocalHost],
    client: ServiceBusClient,
    seen: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    send(client, "plain-renewal-limit", {"n": 0, "sleep": 8})
    start(
        "plain_tasks",
        "plain-renewal-limit",
        maxAutoLockRenewalDuration="00:00:04",
        maxConcurrentCalls=2,
    )
    first, second = wait_for(
        lambda: (
            len(seen.of("plain_tasks")) == 2
            and sorted(seen.of("plain_tasks"), key=lambda c: c["started"])
        ),
        timeout=25,
        what="the message delivered again once renewal stopped",
    )
    counts = delivery_counts(caplog, first["message_id"])
    assert counts[1] == counts[0] + 1
    # By the broker's clock: renewed (without renewal it would be locked again when its first
    # 2 s lock ran out), and renewed no longer than 4 s (so its lock ran out at most one lock
    # duration after that, plus 1 s for the broker to hand it to the host's waiting receiver).
    lock = timedelta(seconds=LOCK_DURATION_SECONDS)
    taken, again = first["locked_until"] - lock, second["locked_until"] - lock
    assert first["locked_until"] < again <= taken + timedelta(seconds=4 + 1) + lock
    # Lost while the first invocation was still running (it sleeps 8 s).
    assert second["started"] < first["at"]


# -- released sessions free their slot at once -------------------------------------------------

# Far longer than any of these tests may take: a session the host kept until it was idle for
# this long would make the test time out instead.
LONG_IDLE = "00:01:00"
WELL_INSIDE_LONG_IDLE = 30


def spans_by_session(calls: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """(first invocation's start, last invocation's end) of each session."""
    spans: dict[str, tuple[float, float]] = {}
    for call in calls:
        start, end = spans.get(call["session_id"], (call["started"], call["at"]))
        spans[call["session_id"]] = (min(start, call["started"]), max(end, call["at"]))
    return spans


def test_released_sessions_complete_one_after_the_other_well_inside_the_idle_timeout(
    start: Callable[..., LocalHost],
    client: ServiceBusClient,
    quick_client: ServiceBusClient,
    seen: Any,
) -> None:
    """One session slot, sessionIdleTimeout 60 s, two sessions whose function releases the
    session with its last message: the second session is taken as soon as the first is
    released, so both are done well before one idle timeout could have run out. Without the
    release (or with the host ignoring it) the slot would wait 60 s for more of the first
    session, and the test would time out."""
    queue = "sessions-release-in-turn"
    for session in ("first", "second"):
        send(
            client,
            queue,
            {"n": 0},
            {"n": 1},
            {"n": 2, "release": True},
            session_id=session,
        )
    start("session_tasks", queue, maxConcurrentSessions=1, sessionIdleTimeout=LONG_IDLE)
    calls = calls_of(
        seen,
        "session_tasks",
        6,
        timeout=WELL_INSIDE_LONG_IDLE,
        what="both sessions, each released after its last message",
    )
    earlier, later = sorted(spans_by_session(calls).values())
    assert earlier[1] <= later[0], "two sessions were held at once with maxConcurrentSessions 1"
    for session in ("first", "second"):
        ordered = sorted(
            (c for c in calls if c["session_id"] == session), key=lambda c: c["started"]
        )
        assert [c["sequence"] for c in ordered] == [0, 1, 2]
    wait_for(lambda: no_session_has_messages(quick_client, queue), what="every message completed")


def test_a_released_session_frees_its_slot_for_a_waiting_one_within_max_concurrent_sessions(
    start: Callable[..., LocalHost],
    client: ServiceBusClient,
    quick_client: ServiceBusClient,
    seen: Any,
) -> None:
    """Six sessions wait for two slots; each releases its session after its third message. The
    slots take the waiting sessions as the earlier ones are released (well inside the 60 s idle
    timeout), and never hold more than two sessions at once: from a session's first invocation
    to its last, at most one other session is between its own first and last."""
    queue = "sessions-release-frees-slot"
    sessions = [f"s{n}" for n in range(6)]
    for session in sessions:
        send(
            client,
            queue,
            {"n": 0, "sleep": 0.1},
            {"n": 1, "sleep": 0.1},
            {"n": 2, "sleep": 0.1, "release": True},
            session_id=session,
        )
    start("session_tasks", queue, maxConcurrentSessions=2, sessionIdleTimeout=LONG_IDLE)
    calls = calls_of(
        seen,
        "session_tasks",
        18,
        timeout=WELL_INSIDE_LONG_IDLE,
        what="six sessions through two slots, each released after its last message",
    )
    spans = spans_by_session(calls)
    assert sorted(spans) == sessions
    # Sessions held at once: +1 at a session's first start, -1 after its last end.
    events = sorted(
        [(start, 1) for start, _ in spans.values()] + [(end, -1) for _, end in spans.values()],
        key=lambda event: (event[0], event[1]),
    )
    held = list(itertools.accumulate(change for _, change in events))
    assert max(held) == 2, f"sessions held at once: {held}"
    assert seen.max_in_flight == 2
    wait_for(lambda: no_session_has_messages(quick_client, queue), what="every message completed")


# -- the broker going away ---------------------------------------------------------------------


def test_a_lost_broker_is_logged_once_and_a_stop_while_it_is_gone_is_quiet(
    seen: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The emulator (its own, on a fixed port) dies under a host whose four session slots are
    waiting for sessions. An outage that lasts is logged once for the trigger, not once per
    slot and retry; when the emulator is back the host says so and takes sessions again. Then
    it dies again and the host is stopped as soon as it notices, as on Ctrl-C in ``make up``
    (where the emulator gets the signal too): nothing is logged above debug."""
    from local_host_testing import SAMPLE_APP, emulator_config
    from servicebus_emulator.testing import run_emulator

    caplog.set_level(logging.DEBUG, logger="functions_local_host")

    def records(level: int, text: str) -> list[logging.LogRecord]:
        return [
            r
            for r in caplog.records
            if r.name == "functions_local_host" and r.levelno == level and text in r.getMessage()
        ]

    def loud() -> list[str]:
        return [
            r.getMessage()
            for r in caplog.records
            if r.name == "functions_local_host" and r.levelno >= logging.WARNING
        ]

    with run_emulator(emulator_config()) as emulator:
        settings = {
            "SESSION_QUEUE": "sessions-order",
            "ServiceBusConnection": emulator.connection_string,
        }
        host = LocalHost(
            SAMPLE_APP, settings, host_json(maxConcurrentSessions=4), functions=["session_tasks"]
        ).start()
        try:
            emulator.kill()
            wait_for(lambda: loud(), timeout=20, what="the outage logged")
            # Every slot keeps retrying each second while the emulator restarts.
            emulator.start()
            with ServiceBusClient.from_connection_string(emulator.connection_string) as again:
                send(again, "sessions-order", {"n": 0, "release": True}, session_id="after")
            wait_for(lambda: seen.of("session_tasks"), timeout=20, what="a session after")
            # The function has returned; the host completes the message after it, and lets go
            # of the session it asked to release. The emulator dies again only once the
            # broker has no message left: on a busy machine the completion can come well after
            # the function's return, and a kill before it is a failed completion (a warning).
            wait_for(
                lambda: not any(emulator.counts()["sessions-order"].values()),
                timeout=20,
                what="the message completed at the broker",
            )
            assert len(records(logging.DEBUG, "unreachable")) > 4, "a retry of every slot"
            (warning,) = loud()
            assert "unreachable" in warning
            assert records(logging.INFO, "reachable again")

            caplog.clear()
            emulator.kill()
            # Stopped as soon as the host notices (this polls every 50 ms): well inside the
            # 3 s an outage lasts before it is logged (_OUTAGE_GRACE_SECONDS).
            wait_for(
                lambda: records(logging.DEBUG, "unreachable"),
                timeout=20,
                what="the host noticing",
            )
        finally:
            host.stop()
        assert loud() == []


def test_an_invocation_that_outlasts_the_stop_ends_without_an_error_in_a_host_thread(
    servicebus_connection_string: str,
    client: ServiceBusClient,
    seen: Any,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The host stops after its drain timeout (0.5 s) while a function still runs (3 s): the
    receivers are closed under it. When the function returns, the host's completion fails with
    a warning that says why, and no host thread dies of an exception."""
    from local_host_testing import SAMPLE_APP

    crashes: list[str] = []
    monkeypatch.setattr(
        threading, "excepthook", lambda args: crashes.append(f"{args.exc_type}: {args.exc_value}")
    )
    queue = "sessions-outlast-drain"
    send(client, queue, {"n": 0, "sleep": 3}, session_id="slow")
    host = LocalHost(
        SAMPLE_APP,
        {"SESSION_QUEUE": queue, "ServiceBusConnection": servicebus_connection_string},
        host_json(),
        functions=["session_tasks"],
        drain_timeout=0.5,
    )
    with host:
        wait_for(lambda: seen.in_flight == 1, timeout=15, what="the invocation running")
    wait_for(lambda: seen.of("session_tasks"), timeout=15, what="the invocation ending")

    def completion_failed() -> list[str]:
        return [
            r.getMessage()
            for r in caplog.records
            if "Completion of message" in r.getMessage() or r.levelno >= logging.ERROR
        ]

    (outcome,) = wait_for(completion_failed, what="the host's completion after the function")
    assert crashes == []
    assert outcome.startswith("session_tasks: Completion of message"), outcome
    assert "closed" in outcome
