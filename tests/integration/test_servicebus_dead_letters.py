"""The Service Bus adapters of the archive and replay on the project's emulator: the
dead-letter source, the resender and the session seeder."""

from __future__ import annotations

import time
from datetime import datetime

import pytest
from azure.servicebus import ServiceBusClient
from azure.servicebus.exceptions import MessageSizeExceededError

from shared.adapters.servicebus_dead_letters import (
    ServiceBusDeadLetterSource,
    ServiceBusResender,
    ServiceBusSessionSeeder,
)
from shared.domain.envelope import parse_task_message
from shared.domain.errors import SessionTooLarge
from shared.service_layer.ports import OutgoingMessage

from .conftest import POOL_LOCK_SECONDS, ServiceBusEmulator
from .servicebus import (
    dead_letter_session,
    get_session_state,
    receive_session,
    send_tasks,
    tasks,
)

pytestmark = pytest.mark.integration


def why(message) -> tuple[str, str]:
    step = parse_task_message(message.body).step
    return (f"Reason{step}", f"step {step} failed")


def test_the_source_reads_dead_letters_with_everything_the_archive_keeps(
    servicebus_client: ServiceBusClient, session_queue: str
) -> None:
    send_tasks(servicebus_client, session_queue, "s/1", tasks("job-dl", 3))
    dead_letter_session(servicebus_client, session_queue, "s/1", why)

    with ServiceBusDeadLetterSource(servicebus_client).open(session_queue) as reader:
        letters = reader.receive(10)
        reader.complete(letters)

    assert [letter.message_id for letter in letters] == ["job-dl:1", "job-dl:2", "job-dl:3"]
    first = letters[0]
    assert (first.queue, first.session_id, first.content_type) == (
        session_queue,
        "s/1",
        "application/json",
    )
    assert (first.reason, first.description) == ("Reason1", "step 1 failed")
    assert parse_task_message(first.body).payload == {"n": 1}
    assert first.application_properties == {
        "job_id": "job-dl",
        "pipeline": "purchase",
        "task": "GenerateOrderNumber",
        "step": 1,
        "is_last": False,
    }
    assert isinstance(first.enqueued_time, datetime) and first.enqueued_time.tzinfo is not None
    assert first.delivery_count is not None
    numbers = [letter.sequence_number for letter in letters]
    assert numbers == sorted(numbers) and numbers[0] > 0


def test_completed_dead_letters_are_gone_and_uncompleted_ones_come_back(
    servicebus_client: ServiceBusClient,
    servicebus_emulator: ServiceBusEmulator,
    session_queue: str,
) -> None:
    send_tasks(servicebus_client, session_queue, "s-2", tasks("job-back", 4))
    dead_letter_session(servicebus_client, session_queue, "s-2", why)
    source = ServiceBusDeadLetterSource(servicebus_client)

    with source.open(session_queue) as reader:
        letters = reader.receive(4)
        reader.complete(letters[:2])  # the reader closes holding the locks of the other two

    assert servicebus_emulator.counts(session_queue)["dead_lettered"] == 2
    deadline = time.monotonic() + POOL_LOCK_SECONDS + 10
    again: list = []
    with source.open(session_queue) as reader:
        # Waits out the locks the first reader held; they lapse one by one, so a receive
        # may bring back one of the two while the other is still locked.
        while len(again) < 2 and time.monotonic() < deadline:
            batch = reader.receive(4)
            reader.complete(batch)
            again += batch
    assert [letter.message_id for letter in again] == ["job-back:3", "job-back:4"]
    assert servicebus_emulator.counts(session_queue)["dead_lettered"] == 0


def test_the_resender_sends_raw_messages_in_order_under_the_new_session(
    servicebus_client: ServiceBusClient, session_queue: str
) -> None:
    big = b"\x00\xff" * (300 * 1024)  # 600 KiB each: the three need three batches
    outgoing = [
        OutgoingMessage(
            body=big if n % 2 else f"body {n}".encode(),
            message_id=f"new:{n}",
            content_type="application/octet-stream" if n % 2 else "application/json",
            application_properties={"step": n, "is_last": n == 5, "replay_of": "old"},
        )
        for n in range(1, 6)
    ]

    ServiceBusResender(servicebus_client).resend(session_queue, "new", outgoing)
    ServiceBusResender(servicebus_client).resend(session_queue, "new", outgoing)  # deduplicated

    messages = receive_session(servicebus_client, session_queue, "new")
    assert [m.message_id for m in messages] == [f"new:{n}" for n in range(1, 6)]
    assert [m.body for m in messages] == [o.body for o in outgoing]
    assert [m.application_properties for m in messages] == [
        {"step": n, "is_last": n == 5, "replay_of": "old"} for n in range(1, 6)
    ]


def test_a_single_message_too_large_for_the_queue_is_refused(
    servicebus_client: ServiceBusClient, session_queue: str
) -> None:
    huge = OutgoingMessage(body=b"x" * (2 * 1024 * 1024), message_id="huge")

    with pytest.raises(SessionTooLarge) as refused:
        ServiceBusResender(servicebus_client).resend(session_queue, "too-big", [huge])

    assert isinstance(refused.value.__cause__, MessageSizeExceededError)

    assert receive_session(servicebus_client, session_queue, "too-big") == []


def test_the_seeder_sets_the_state_of_a_session_before_its_first_message(
    servicebus_client: ServiceBusClient, session_queue: str
) -> None:
    ServiceBusSessionSeeder(servicebus_client).seed(session_queue, "seeded", b'{"next_step": 3}')
    send_tasks(servicebus_client, session_queue, "seeded", tasks("job-seed", 2))

    assert get_session_state(servicebus_client, session_queue, "seeded") == b'{"next_step": 3}'
    assert len(receive_session(servicebus_client, session_queue, "seeded")) == 2


def test_seeding_again_does_not_rewind_a_session_already_under_way(
    servicebus_client: ServiceBusClient, session_queue: str
) -> None:
    """A replay repeated after a crash between sending and marking seeds again, while the
    processor may already have moved the session on."""
    seeder = ServiceBusSessionSeeder(servicebus_client)
    seeder.seed(session_queue, "under-way", b'{"next_step": 1}')
    with servicebus_client.get_queue_receiver(
        session_queue, session_id="under-way", max_wait_time=2
    ) as receiver:
        receiver.session.set_state(b'{"next_step": 4}')  # what the processor wrote since

    seeder.seed(session_queue, "under-way", b'{"next_step": 1}')

    assert get_session_state(servicebus_client, session_queue, "under-way") == b'{"next_step": 4}'
