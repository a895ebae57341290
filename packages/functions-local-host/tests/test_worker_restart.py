"""A worker process that dies is restarted, as the Functions host restarts its language worker
channel: the invocations it was running fail and their messages come back once, the ones that
arrive meanwhile wait for the new worker, and the host's health says what happened."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Callable

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

from functions_local_host import LocalHost
from local_host_testing import FAST_HOST_JSON, wait_for

pytestmark = pytest.mark.integration

QUEUE = "sessions-worker-restart"
SESSIONS = 8
STEPS = 3
_EXECUTING = re.compile(
    r"Executing 'Functions\.session_tasks' \(Reason=.*?, Id=(?P<id>[0-9a-f-]+)\)\s*"
    r"Trigger Details: MessageId: (?P<message>[^,]+), SequenceNumber: \d+, "
    r"DeliveryCount: (?P<count>\d+)"
)
_EXECUTED = re.compile(r"Executed 'Functions\.session_tasks' \((?P<outcome>\w+), Id=(?P<id>[^,]+),")


def executions(caplog: pytest.LogCaptureFixture) -> list[tuple[str, int, str]]:
    """(message id, delivery count, Succeeded|Failed) of each finished invocation, in order."""
    started = {m["id"]: (m["message"], int(m["count"])) for m in _EXECUTING.finditer(caplog.text)}
    return [
        (*started[m["id"]], m["outcome"])
        for m in _EXECUTED.finditer(caplog.text)
        if m["id"] in started
    ]


def test_a_killed_worker_is_restarted_and_every_message_is_processed_once(
    run_host: Callable[..., LocalHost],
    servicebus_connection_string: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    document = json.loads(json.dumps(FAST_HOST_JSON))
    document["extensions"]["serviceBus"]["maxConcurrentSessions"] = 4
    host = run_host(
        ["session_tasks", "whoami"],
        settings={"SESSION_QUEUE": QUEUE, "ServiceBusConnection": servicebus_connection_string},
        host_json=document,
        worker_processes=True,
    )
    [first] = host.health()["workers"]
    ids = {f"s{s}": [f"s{s}-{n}" for n in range(STEPS)] for s in range(SESSIONS)}
    with ServiceBusClient.from_connection_string(servicebus_connection_string) as client:
        with client.get_queue_sender(QUEUE) as sender:
            sender.send_messages(
                [
                    ServiceBusMessage(
                        json.dumps({"n": n, "sleep": 0.5}), session_id=session, message_id=m
                    )
                    for session, messages in ids.items()
                    for n, m in enumerate(messages)
                ]
            )
        wait_for(
            lambda: sum(o == "Succeeded" for *_, o in executions(caplog)) >= 4,
            timeout=30,
            what="a few messages processed",
        )

        os.kill(first["pid"], signal.SIGKILL)

        restarting = wait_for(
            lambda: (h := host.health())["workers"][0]["state"] == "restarting" and h,
            timeout=10,
            what="the health to show the worker restarting",
            interval=0.02,
        )
        assert restarting["errors"] and "exit code -9" in restarting["errors"][0]
        every = [m for messages in ids.values() for m in messages]
        wait_for(
            lambda: {m for m, _, o in executions(caplog) if o == "Succeeded"} >= set(every),
            timeout=60,
            what="every message processed",
        )
        with client.get_queue_receiver(
            QUEUE, sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=1
        ) as dead_letters:
            assert dead_letters.peek_messages(max_message_count=1) == []

    done = executions(caplog)
    succeeded = Counter(m for m, _, o in done if o == "Succeeded")
    assert set(succeeded.values()) == {1}, "a message was processed twice"
    failed = [(m, count) for m, count, o in done if o == "Failed"]
    assert failed, "no invocation was in flight when the worker died"
    assert all(count == 1 for _, count in failed)  # abandoned once, then processed
    counts: dict[str, list[int]] = defaultdict(list)
    for message, count, _ in done:
        counts[message].append(count)
    assert all(c in ([1], [1, 2]) for c in counts.values()), counts
    for session, messages in ids.items():  # each session still in order
        order = [m for m, _, o in done if o == "Succeeded" and m.startswith(f"{session}-")]
        assert order == messages
    [worker] = host.health()["workers"]
    assert worker["state"] == "running" and worker["restarts"] == 1
    assert worker["pid"] not in (None, first["pid"])
    assert worker["lastExit"]["exitCode"] == -9
    assert host.health()["errors"] == []
    exits = [r.getMessage() for r in caplog.records if "exited with exit code" in r.getMessage()]
    assert len(exits) == 1 and "exit code -9 (SIGKILL); restarting it." in exits[0]

    # Dead again within a minute of its start: the next restart waits (1 s, then 2, 4 ...).
    os.kill(worker["pid"], signal.SIGKILL)
    wait_for(
        lambda: host.health()["workers"][0]["restarts"] == 2, timeout=30, what="a second restart"
    )
    exits = [r.getMessage() for r in caplog.records if "exited with exit code" in r.getMessage()]
    assert "restarting it in 1 s." in exits[1]
    with urllib.request.urlopen(f"{host.http_url}/api/whoami", timeout=30) as answer:
        assert int(answer.read()) == host.health()["workers"][0]["pid"]
