"""The worker in processes of its own, as the Functions host runs it: the host starts
FUNCTIONS_WORKER_PROCESS_COUNT worker processes, each connects back to the host's gRPC server
with the FunctionRpc event stream, invocations go to them in turn, the app's logs come back as
RpcLog, and the Service Bus extension's settlement client in each reaches the Settlement
service on the same server."""

from __future__ import annotations

import json
import logging
import os
import urllib.request
from collections.abc import Callable

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

from functions_local_host import LocalHost

pytestmark = pytest.mark.integration


def get(host: LocalHost, path: str) -> str:
    with urllib.request.urlopen(f"{host.http_url}/{path}", timeout=30) as response:
        return str(response.read().decode())


def test_invocations_go_to_the_worker_processes_in_turn_and_their_logs_to_the_host(
    run_host: Callable[..., LocalHost], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    host = run_host(
        ["whoami"], settings={"FUNCTIONS_WORKER_PROCESS_COUNT": "2"}, worker_processes=True
    )

    pids = {int(get(host, f"api/whoami?n={n}")) for n in range(4)}

    assert len(pids) == 2
    assert os.getpid() not in pids
    assert any(f"whoami from process {pid}" in caplog.text for pid in pids)


def test_a_worker_process_settles_through_the_hosts_grpc_server(
    run_host: Callable[..., LocalHost], servicebus_connection_string: str
) -> None:
    run_host(
        ["plain_tasks"],
        settings={
            "PLAIN_QUEUE": "plain-worker-process",
            "ServiceBusConnection": servicebus_connection_string,
        },
        worker_processes=True,
    )
    with ServiceBusClient.from_connection_string(servicebus_connection_string) as client:
        with client.get_queue_sender("plain-worker-process") as sender:
            sender.send_messages(ServiceBusMessage(json.dumps({"n": 1, "settle": "deadletter"})))
        with client.get_queue_receiver(
            "plain-worker-process", sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=30
        ) as dead_letters:
            (dead,) = dead_letters.receive_messages(max_message_count=1, max_wait_time=30)
            assert dead.dead_letter_reason == "TestReason"
            dead_letters.complete_message(dead)
