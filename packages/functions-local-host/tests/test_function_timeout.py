"""host.json's functionTimeout, enforced as the Functions host enforces it: the invocation fails
with the WebJobs SDK's FunctionTimeoutException message, its message is abandoned and comes
back, and (with worker processes) the worker that ran it is restarted."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from functions_local_host import LocalHost
from local_host_testing import FAST_HOST_JSON, wait_for

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("queue", "worker_processes"), [("plain-timeout", False), ("plain-timeout-process", True)]
)
def test_a_function_past_its_timeout_is_failed_and_its_message_redelivered(
    run_host: Callable[..., LocalHost],
    servicebus_connection_string: str,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    queue: str,
    worker_processes: bool,
) -> None:
    caplog.set_level(logging.INFO)
    document = {**json.loads(json.dumps(FAST_HOST_JSON)), "functionTimeout": "00:00:02"}
    host = run_host(
        ["plain_tasks"],
        settings={"PLAIN_QUEUE": queue, "ServiceBusConnection": servicebus_connection_string},
        host_json=document,
        worker_processes=worker_processes,
    )
    # The first delivery sleeps 8 s (past the 2 s timeout); the second returns at once.
    marker = tmp_path / "slept"
    command = {"n": 1, "sleep": 8, "sleep_unless_file": str(marker)}
    with (
        ServiceBusClient.from_connection_string(servicebus_connection_string) as client,
        client.get_queue_sender(queue) as sender,
    ):
        sender.send_messages(ServiceBusMessage(json.dumps(command), message_id="slow"))

    def outcomes() -> list[str]:
        return re.findall(r"Executed 'Functions\.plain_tasks' \((\w+),", caplog.text)

    wait_for(lambda: outcomes() == ["Failed", "Succeeded"], timeout=40, what="a retry after it")

    assert marker.exists()
    assert "Timeout value of 00:00:02 exceeded by function 'Functions.plain_tasks'" in caplog.text
    assert "Timeout value of 00:00:02 was exceeded by function: Functions.plain_tasks" in (
        caplog.text
    )
    counts = re.findall(r"MessageId: slow, SequenceNumber: \d+, DeliveryCount: (\d+)", caplog.text)
    assert counts == ["1", "2"]
    [duration] = re.findall(r"\(Failed, Id=[^,]+, Duration=(\d+)ms\)", caplog.text)
    assert 2000 <= int(duration) < 6000, "failed at the timeout, not when the function ended"
    if worker_processes:
        assert "A function timeout has occurred. Restarting worker process" in caplog.text
        [worker] = host.health()["workers"]
        assert worker["restarts"] == 1
        assert worker["lastExit"]["reason"].startswith("function timeout")
