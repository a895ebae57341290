"""The dead-letter functions end to end on real parts: dead letters in the project's Service Bus
emulator (driven by the azure-servicebus SDK), the archive and the replay queue on Azurite.
The timer reads the real dead-letter sub-queue and a replay sends real messages."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusSubQueue

from servicebus_emulator.testing import run_emulator
from shared.adapters.servicebus_dead_letters import (
    ServiceBusResender,
    ServiceBusSessionSeeder,
)
from shared.adapters.servicebus_sender import to_service_bus_message
from shared.bootstrap import parts as adapters
from shared.domain.archive import FailureRecord, replay_session_id
from shared.domain.pipelines import PURCHASE_TASKS
from shared.domain.session_state import decode_session_state
from shared.entrypoints.replay_queue import replay_requests
from tests.builders import purchase_message

from .conftest import StorageApp
from .test_dead_letters import (
    PURCHASE,
    _deliver,
    _json,
    _request_replay,
    _status,
    assert_problem,
    replay,
    run_timer,
)

pytestmark = pytest.mark.integration

CONFIG = Path(__file__).resolve().parents[2] / "infra" / "local" / "config.json"
CONTEXT = {"order_number": "ORD-00000042", "total": "129.90"}


@pytest.fixture
def bus(storage_app: StorageApp) -> Iterator[ServiceBusClient]:
    """A fresh emulator with the app's queues; the container's Service Bus ports on it."""
    with run_emulator(CONFIG) as emulator:
        client = ServiceBusClient.from_connection_string(emulator.connection_string)
        c = storage_app.container
        # Every archive run ends on an empty receive per queue; the local emulator has nothing
        # in flight, so waiting the default 2 s for stragglers only slows the tests down: the
        # setting the app reads says 0.5 s (tests.builders.APP_SETTINGS).
        c.override(dead_letter_source=adapters.dead_letter_source(client, c.settings))
        c.override(resender=ServiceBusResender(client))
        c.override(session_seeder=ServiceBusSessionSeeder(client))
        with client:
            yield client


def purchase_that_failed_at_payment(app: StorageApp, bus: ServiceBusClient, session: str) -> None:
    """A purchase session sent whole; steps 1-2 done, ProcessPayment dead-lettered because the
    provider was down and the rest dead-lettered as SessionFailed, as the processor does."""
    messages = [purchase_message(session, step) for step in range(1, len(PURCHASE_TASKS) + 1)]
    with bus.get_queue_sender(PURCHASE) as sender:
        sender.send_messages([to_service_bus_message(session, m) for m in messages])
    with bus.get_queue_receiver(PURCHASE, session_id=session, max_wait_time=5) as receiver:
        received = receiver.receive_messages(max_message_count=5, max_wait_time=5)
        assert len(received) == 5
        for message in received[:2]:
            receiver.complete_message(message)
        receiver.dead_letter_message(
            received[2], reason="PaymentProviderUnavailable", error_description="down"
        )
        for message in received[3:]:
            receiver.dead_letter_message(message, reason="SessionFailed", error_description="x")
    app.container.archive.record(
        session,
        FailureRecord("ProcessPayment", 3, "PaymentProviderUnavailable", "down", "t", CONTEXT),
    )


def receive_session(bus: ServiceBusClient, session: str) -> tuple[list[dict[str, object]], bytes]:
    with bus.get_queue_receiver(PURCHASE, session_id=session, max_wait_time=5) as receiver:
        state = receiver.session.get_state()
        messages = receiver.receive_messages(max_message_count=10, max_wait_time=1)
        for message in messages:
            receiver.complete_message(message)
    return [json.loads(b"".join(m.body)) for m in messages], state


def test_dead_letters_archived_by_the_timer_are_replayed_in_order_under_a_new_session(
    storage_app: StorageApp, bus: ServiceBusClient
) -> None:
    purchase_that_failed_at_payment(storage_app, bus, "order/7")

    run_timer()

    with bus.get_queue_receiver(
        PURCHASE, sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=1
    ) as dlq:
        assert dlq.peek_messages(max_message_count=10) == []  # completed after archiving
    rows = storage_app.container.archive.list_session("order/7")
    assert [(r.step, r.reason) for r in rows] == [
        (3, "PaymentProviderUnavailable"),
        (4, "SessionFailed"),
        (5, "SessionFailed"),
    ]

    response = replay("order/7", "incident-1")

    assert response.status_code == 202
    new_session = replay_session_id("order/7", "incident-1")
    assert _json(response)["new_session_id"] == new_session
    bodies, state = receive_session(bus, new_session)
    assert [(b["step"], b["task"]) for b in bodies] == [
        (3, "ProcessPayment"),
        (4, PURCHASE_TASKS[3]),
        (5, PURCHASE_TASKS[4]),
    ]
    seeded = decode_session_state(state)
    assert seeded is not None and seeded.next_step == 3
    assert dict(seeded.context) == CONTEXT

    again = replay("order/7", "incident-1")

    assert (again.status_code, _json(again)) == (202, _json(response))  # the first response
    assert receive_session(bus, new_session)[0] == []


def test_a_replay_whose_new_session_is_locked_elsewhere_is_a_409_and_sends_nothing(
    storage_app: StorageApp, bus: ServiceBusClient
) -> None:
    purchase_that_failed_at_payment(storage_app, bus, "order/8")
    run_timer()
    new_session = replay_session_id("order/8", "fix")

    # Another receiver holds the new session while the replay seeds its state.
    with bus.get_queue_receiver(PURCHASE, session_id=new_session, max_wait_time=1):
        locked = replay("order/8", "fix")

    document = assert_problem(locked, 409)
    assert locked.headers["Retry-After"] == "5"
    assert "lock" in document["detail"]
    assert receive_session(bus, new_session)[0] == []
    again = replay("order/8", "fix")  # the key was released: the same request goes through
    assert (again.status_code, _json(again)["sent"]) == (202, 3)


def test_a_bulk_replay_from_the_storage_queue_sends_every_matching_session(
    storage_app: StorageApp, bus: ServiceBusClient
) -> None:
    for session in ("order-1", "order-2"):
        purchase_that_failed_at_payment(storage_app, bus, session)
    run_timer()
    request_id = _json(_request_replay({"reason": "PaymentProviderUnavailable"}))["request_id"]

    replay_requests(_deliver(storage_app))

    progress = _json(_status(request_id))
    assert (progress["status"], progress["found"], progress["sent"]) == ("completed", 2, 2)
    for session in ("order-1", "order-2"):
        bodies, _ = receive_session(bus, replay_session_id(session, f"bulk:{request_id}"))
        assert [b["step"] for b in bodies] == [3, 4, 5]
