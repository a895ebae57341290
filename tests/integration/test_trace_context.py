"""Trace context across the emulator, both ways: what the app stamps on a message the
azure-servicebus SDK's own tracing module reads from the received message, and what the SDK
stamps when its tracing is on (it sends a message in a span of its own, a child of the
current one) the app reads."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
from azure.core.settings import settings
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceivedMessage
from azure.servicebus._common.tracing import get_span_link_from_message
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanContext, TraceFlags

from shared.telemetry.context import message_span_context, trace_id_of, trace_properties

pytestmark = pytest.mark.integration


def receive_one(client: ServiceBusClient, queue: str, session_id: str) -> ServiceBusReceivedMessage:
    with client.get_queue_receiver(queue, session_id=session_id, max_wait_time=5) as receiver:
        (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        receiver.complete_message(message)
    return message


@pytest.fixture
def sdk_tracing() -> Iterator[None]:
    """The SDK's tracing on (azure-core's OpenTelemetry plugin), as the distro turns it on."""
    saved = settings.tracing_implementation()
    settings.tracing_implementation = "opentelemetry"
    yield
    settings.tracing_implementation = saved


def test_what_the_app_stamps_the_sdk_reads_from_the_received_message(
    servicebus_client: ServiceBusClient, session_queue: str
) -> None:
    context = SpanContext(
        random.getrandbits(128), random.getrandbits(64), True, TraceFlags(TraceFlags.SAMPLED)
    )
    properties: dict[str | bytes, Any] = {}
    properties.update(trace_properties(context))
    with servicebus_client.get_queue_sender(session_queue) as sender:
        sender.send_messages(
            ServiceBusMessage(
                b"{}", session_id="s-app", message_id="m-app", application_properties=properties
            )
        )

    received = receive_one(servicebus_client, session_queue, "s-app")

    link = get_span_link_from_message(received)
    assert link is not None
    assert link.headers["traceparent"] == trace_properties(context)["traceparent"]
    assert trace_id_of(received.application_properties) == trace.format_trace_id(context.trace_id)


def test_what_the_sdk_stamps_when_it_traces_the_app_reads(
    servicebus_client: ServiceBusClient, session_queue: str, sdk_tracing: None
) -> None:
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("enqueue an order") as span:
        with servicebus_client.get_queue_sender(session_queue) as sender:
            sender.send_messages(ServiceBusMessage(b"{}", session_id="s-sdk", message_id="m-sdk"))
        sent_in = span.get_span_context()

    received = receive_one(servicebus_client, session_queue, "s-sdk")

    properties = received.application_properties or {}
    assert {b"traceparent", b"Diagnostic-Id"} <= set(properties)
    found = message_span_context(properties)
    assert found is not None
    assert found.trace_id == sent_in.trace_id
