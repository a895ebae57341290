"""The task sender: the mapping of tasks to Service Bus messages and the one-batch rule on the
SDK's own types, and whole sessions sent to the project's Service Bus emulator."""

from __future__ import annotations

import json

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessageBatch
from azure.servicebus.exceptions import ServiceBusError

from shared.adapters.servicebus_sender import (
    SenderPool,
    ServiceBusTaskSender,
    fill_batch,
    to_service_bus_message,
)
from shared.domain.envelope import TaskMessage, parse_task_message
from shared.domain.errors import SessionTooLarge

from .conftest import ServiceBusEmulator
from .servicebus import receive_session

pytestmark = pytest.mark.integration


def tasks(count: int, payload_size: int = 10, job_id: str = "job-1") -> list[TaskMessage]:
    return [
        TaskMessage(
            job_id=job_id,
            pipeline="product_import",
            task="ImportProduct",
            step=step,
            is_last=step == count,
            payload={"filler": "x" * payload_size},
        )
        for step in range(1, count + 1)
    ]


def test_a_task_becomes_a_session_message_with_routing_properties() -> None:
    [task] = tasks(1)

    message = to_service_bus_message("job-1", task)

    assert message.session_id == "job-1"
    assert message.message_id == "job-1:1"
    assert message.content_type == "application/json"
    assert message.application_properties == {
        "job_id": "job-1",
        "pipeline": "product_import",
        "task": "ImportProduct",
        "step": 1,
        "is_last": True,
    }
    body = b"".join(message.body)
    assert parse_task_message(body) == task
    assert json.loads(body)["payload"] == {"filler": "x" * 10}


def test_a_caller_may_choose_the_message_id() -> None:
    [task] = tasks(1)
    assert to_service_bus_message("s", task, message_id="job-1:row-9").message_id == "job-1:row-9"


def test_the_messages_go_into_the_batch_in_order() -> None:
    batch = ServiceBusMessageBatch(max_size_in_bytes=256 * 1024)

    fill_batch(batch, "job-1", tasks(5))

    assert len(batch) == 5
    # The SDK exposes no public view of the messages in a batch; its list is the send order.
    assert [message.message_id for message in batch._messages] == [
        f"job-1:{step}" for step in range(1, 6)
    ]


def test_a_session_too_large_for_one_batch_is_refused_with_advice() -> None:
    batch = ServiceBusMessageBatch(max_size_in_bytes=4 * 1024)

    with pytest.raises(SessionTooLarge, match="Split the job into smaller sessions"):
        fill_batch(batch, "job-1", tasks(10, payload_size=1000))


def test_a_session_arrives_on_the_queue_in_order_with_its_routing_properties(
    servicebus_client: ServiceBusClient, session_queue: str
) -> None:
    sender = ServiceBusTaskSender(servicebus_client)

    sender.send_session(session_queue, "order/42#a", tasks(5))

    messages = receive_session(servicebus_client, session_queue, "order/42#a")
    assert [m.message_id for m in messages] == [f"job-1:{step}" for step in range(1, 6)]
    assert [parse_task_message(m.body).step for m in messages] == [1, 2, 3, 4, 5]
    assert [m.application_properties["is_last"] for m in messages] == [False] * 4 + [True]
    assert {m.session_id for m in messages} == {"order/42#a"}
    sequence_numbers = [m.sequence_number or 0 for m in messages]
    assert sequence_numbers == sorted(sequence_numbers)


def test_sending_the_same_session_again_is_dropped_by_duplicate_detection(
    servicebus_client: ServiceBusClient, session_queue: str
) -> None:
    sender = ServiceBusTaskSender(servicebus_client)

    sender.send_session(session_queue, "twice", tasks(3))
    sender.send_session(session_queue, "twice", tasks(3))

    assert len(receive_session(servicebus_client, session_queue, "twice")) == 3


def test_a_session_too_large_for_the_queue_sends_nothing(
    servicebus_client: ServiceBusClient,
    servicebus_emulator: ServiceBusEmulator,
    session_queue: str,
) -> None:
    sender = ServiceBusTaskSender(servicebus_client)

    with pytest.raises(SessionTooLarge, match="nothing was sent"):
        # 30 x 64 KiB: more than one batch (1 MiB on the emulator and Premium, 256 KiB on
        # Standard) can hold.
        sender.send_session(session_queue, "huge", tasks(30, payload_size=64 * 1024))

    assert servicebus_emulator.counts(session_queue)["active"] == 0
    assert receive_session(servicebus_client, session_queue, "huge") == []


def test_one_open_sender_per_queue_serves_every_session_and_a_failed_one_is_replaced(
    servicebus_client: ServiceBusClient, session_queue: str
) -> None:
    pool = SenderPool(servicebus_client)
    sender = ServiceBusTaskSender(servicebus_client, pool)

    for n in range(3):
        sender.send_session(session_queue, f"pooled-{n}", tasks(2, job_id=f"pooled-{n}"))
    with pool.sender(session_queue) as first:
        pass
    with pool.sender(session_queue) as second:
        pass
    with pool.sender("no-such-queue") as doomed:
        pass
    with pytest.raises(ServiceBusError):
        sender.send_session("no-such-queue", "lost", tasks(1))
    with pool.sender("no-such-queue") as replaced:
        pass
    pool.close()

    assert first is second
    assert replaced is not doomed
    for n in range(3):
        assert len(receive_session(servicebus_client, session_queue, f"pooled-{n}")) == 2
