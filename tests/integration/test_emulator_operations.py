"""The emulator counts what clients ask of each entity (``GET /operations``), by kind: the
Service Bus half of the capacity model's inputs (docs/capacity.md). Through the SDK, as the
app and the Functions host ask."""

from __future__ import annotations

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from .conftest import ServiceBusEmulator

pytestmark = pytest.mark.integration


def test_each_operation_on_a_session_queue_is_counted_by_kind(
    servicebus_emulator: ServiceBusEmulator,
    servicebus_client: ServiceBusClient,
    session_queue: str,
) -> None:
    # Given three messages of one session, sent in one batch
    with servicebus_client.get_queue_sender(session_queue) as sender:
        sender.send_messages([ServiceBusMessage(f"m{i}", session_id="s1") for i in range(3)])

    # When a session receiver takes the session, reads and writes its state, completes all
    # three, and closes
    with servicebus_client.get_queue_receiver(session_queue, session_id="s1") as receiver:
        assert receiver.session is not None
        receiver.session.get_state()
        receiver.session.set_state(b"done")
        received = receiver.receive_messages(max_message_count=3, max_wait_time=5)
        while len(received) < 3:
            received += receiver.receive_messages(max_message_count=3, max_wait_time=5)
        for message in received:
            receiver.complete_message(message)

    # Then the queue's operations are each counted once per message or per call
    assert servicebus_emulator.emulator.operations()[session_queue] == {
        "send (messages)": 3,
        "send (batches)": 1,
        "accept session": 1,
        "get-session-state": 1,
        "set-session-state": 1,
        "receive": 3,
        "complete": 3,
        "close session receiver": 1,
    }
