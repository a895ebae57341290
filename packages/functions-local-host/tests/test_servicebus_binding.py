"""What a Service Bus function gets through the local host is what it gets in Azure: the
message the Service Bus extension's converter (``azurefunctions-extensions-bindings-servicebus``,
``utils.get_decoded_message``) makes of the bytes the .NET extension sends
(``ServiceBusExtensionConfigProvider.ConvertReceivedMessageToBindingData``: the 16 lock-token
bytes in .NET's Guid order, then the AMQP encoding of the received message as the .NET client
holds it, its delivery count one more than the broker's)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
import uamqp
from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceivedMessage,
)
from azurefunctions.extensions.bindings.servicebus import serviceBusReceivedMessage, utils

from functions_local_host import LocalHost
from functions_local_host.servicebus_binding import (
    BINDING_CONTENT_TYPE,
    BINDING_SOURCE,
    binding_content,
)
from local_host_testing import sample_app, wait_for

pytestmark = pytest.mark.integration

QUEUE = "sessions-fields"
TTL = timedelta(minutes=5)
# Header, delivery annotations, message annotations, properties, application properties, data.
SECTIONS = [b"\x00\x53\x70", b"\x00\x53\x71", b"\x00\x53\x72", b"\x00\x53\x73", b"\x00\x53\x74"]


def rich_message(session_id: str) -> ServiceBusMessage:
    return ServiceBusMessage(
        json.dumps({"order": 7}).encode(),
        session_id=session_id,
        time_to_live=TTL,
        content_type="application/json",
        correlation_id="correlation-1",
        subject="an order",
        to="someone",
        reply_to="replies",
        reply_to_session_id="reply-session",
        application_properties={"step": "ProcessPayment", "attempt": 2, "ok": True},
    )


@pytest.fixture(scope="module")
def client(servicebus_connection_string: str) -> Iterator[ServiceBusClient]:
    with ServiceBusClient.from_connection_string(servicebus_connection_string) as client:
        yield client


def full_decode(content: bytes) -> Any:
    """Every section of the AMQP part of ``content``, decoded by uamqp (not the converter)."""
    return uamqp.Message.decode_from_bytes(content[16:])


def test_the_bytes_are_laid_out_as_the_dotnet_extension_lays_them_out(
    client: ServiceBusClient,
) -> None:
    session = f"layout-{uuid.uuid4().hex[:8]}"
    with client.get_queue_sender(QUEUE) as sender:
        sender.send_messages(rich_message(session))
    with client.get_queue_receiver(QUEUE, session_id=session, max_wait_time=5) as receiver:
        (received,) = receiver.receive_messages(max_wait_time=5)
        content = binding_content(received)
        lock_token = uuid.UUID(str(received.lock_token))
        receiver.complete_message(received)

    assert content[:16] == lock_token.bytes_le  # Guid.ToByteArray()
    offsets = [content.find(section, 16) for section in SECTIONS]
    assert offsets[0] == 16 and offsets == sorted(offsets), "sections out of AMQP order"
    # The lock token is in the delivery annotations, right after the header: where the
    # extension's converter looks for it.
    assert offsets[1] < content.find(b"x-opt-lock-token") < offsets[2]

    decoded = full_decode(content)
    assert received.delivery_count is not None and received.enqueued_time_utc is not None
    assert decoded.header.delivery_count == received.delivery_count + 1  # .NET's count
    assert decoded.header.time_to_live == TTL.total_seconds() * 1000
    assert decoded.delivery_annotations[b"x-opt-lock-token"] == lock_token
    annotations = decoded.annotations
    assert annotations[b"x-opt-sequence-number"] == received.sequence_number
    enqueued_ms = annotations[b"x-opt-enqueued-time"]
    assert abs(enqueued_ms / 1000 - received.enqueued_time_utc.timestamp()) < 0.001
    properties = decoded.properties
    assert properties.message_id == str(received.message_id).encode()
    assert properties.group_id == session.encode()
    assert properties.correlation_id == b"correlation-1"
    assert properties.content_type == b"application/json"
    assert decoded.application_properties == {
        b"step": b"ProcessPayment",
        b"attempt": 2,
        b"ok": True,
    }
    assert b"".join(decoded.get_data()) == b'{"order": 7}'


def test_a_function_gets_what_the_extensions_converter_makes_of_the_dotnet_bytes(
    run_host: Callable[..., LocalHost],
    client: ServiceBusClient,
    servicebus_connection_string: str,
    seen: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The host hands the message to the worker as the extension's ModelBindingData, and the
    worker's converter decodes it: the function's message equals the converter's output for the
    bytes it was given. The header does not survive the converter (it decodes from the lock
    token in the delivery annotations on): the delivery count and the time to live are None,
    although the bytes carry both."""
    # What the extension's SDK type is built from: the ModelBindingData the worker got.
    given: list[tuple[str, str, bytes]] = []
    real_init = serviceBusReceivedMessage.ServiceBusReceivedMessage.__init__

    def recording_init(self: Any, *, data: Any) -> None:
        given.append((data.source, data.content_type, bytes(data.content)))
        real_init(self, data=data)

    monkeypatch.setattr(
        serviceBusReceivedMessage.ServiceBusReceivedMessage, "__init__", recording_init
    )
    session = f"fields-{uuid.uuid4().hex[:8]}"
    with client.get_queue_sender(QUEUE) as sender:
        sender.send_messages(rich_message(session))
    run_host(
        ["message_as_received"],
        settings={"FIELDS_QUEUE": QUEUE, "ServiceBusConnection": servicebus_connection_string},
    )
    (call,) = wait_for(lambda: seen.of("message_as_received"), timeout=20, what="the message")

    (source, content_type, content) = given[0]
    assert (source, content_type) == (BINDING_SOURCE, BINDING_CONTENT_TYPE)
    from_dotnet_bytes = ServiceBusReceivedMessage(utils.get_decoded_message(content), receiver=None)
    expected = sample_app().message_fields(from_dotnet_bytes)
    got = {name: value for name, value in call.items() if name in expected}
    assert got == expected
    assert call["type"] == "ServiceBusReceivedMessage"
    assert call["body"] == b'{"order": 7}'
    assert call["session_id"] == session
    assert call["application_properties"] == {
        b"step": b"ProcessPayment",
        b"attempt": 2,
        b"ok": True,
    }
    # What Azure does not deliver: the header's fields, and what the SDK derives from them.
    header = full_decode(content).header
    assert (header.delivery_count, header.time_to_live) == (1, TTL.total_seconds() * 1000)
    missing = sorted(name for name, value in got.items() if value is None)
    assert missing == [
        "dead_letter_error_description",
        "dead_letter_reason",
        "dead_letter_source",
        "delivery_count",
        "expires_at_utc",
        "locked_until_utc",
        "partition_key",
        "scheduled_enqueue_time_utc",
        "time_to_live",
    ]
