"""The local host hands each invocation its trigger's W3C trace context, in
``InvocationRequest.trace_context``, where the Functions host puts its own span for the
invocation: a function reads it as ``context.trace_context``, and with the worker's OpenTelemetry
on (``PYTHON_ENABLE_OPENTELEMETRY``) the worker makes it the current context of an async
function. (A synchronous function runs on the worker's thread pool, where that context is not
current: the app's Service Bus functions read ``context.trace_context``.)"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from functions_local_host import LocalHost
from local_host_testing import wait_for

pytestmark = pytest.mark.integration

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_an_http_invocation_gets_the_requests_traceparent_and_tracestate(
    run_host: Callable[..., LocalHost], seen: Any
) -> None:
    host = run_host(["traced"], settings={"PYTHON_ENABLE_OPENTELEMETRY": "true"})
    request = urllib.request.Request(
        f"{host.http_url}/api/traced", headers={"traceparent": TRACEPARENT, "tracestate": "a=1"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 204

    (call,) = seen.of("traced")
    assert call["trace_parent"] == TRACEPARENT
    assert call["trace_state"] == "a=1"
    assert call["current_trace_id"] == "0af7651916cd43dd8448eb211c80319c"


def test_a_request_without_trace_context_gives_an_empty_one(
    run_host: Callable[..., LocalHost], seen: Any
) -> None:
    host = run_host(["traced"])
    with urllib.request.urlopen(f"{host.http_url}/api/traced", timeout=10) as response:
        assert response.status == 204

    (call,) = seen.of("traced")
    assert (call["trace_parent"], call["trace_state"]) == ("", "")


@pytest.mark.parametrize("name", ["traceparent", "Diagnostic-Id"])
def test_a_message_invocation_gets_the_messages_trace_context(
    run_host: Callable[..., LocalHost],
    servicebus_connection_string: str,
    seen: Any,
    name: str,
) -> None:
    with (
        ServiceBusClient.from_connection_string(servicebus_connection_string) as client,
        client.get_queue_sender("plain-traced") as sender,
    ):
        properties: dict[str | bytes, Any] = {name: TRACEPARENT}
        sender.send_messages(
            ServiceBusMessage(json.dumps({"n": 0}), application_properties=properties)
        )
    run_host(
        ["plain_tasks"],
        settings={
            "PLAIN_QUEUE": "plain-traced",
            "ServiceBusConnection": servicebus_connection_string,
        },
    )

    (call,) = wait_for(lambda: seen.of("plain_tasks"), timeout=20, what="the invocation")
    assert call["trace_parent"] == TRACEPARENT
