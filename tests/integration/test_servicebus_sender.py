"""The mapping of tasks to Service Bus messages and the one-batch rule, on the SDK's own
message and batch types. Sending to a queue is covered by the emulator tests."""

from __future__ import annotations

import json

import pytest
from azure.servicebus import ServiceBusMessageBatch

from shared.adapters.servicebus_sender import SessionTooLarge, fill_batch, to_service_bus_message
from shared.domain.envelope import TaskMessage, parse_task_message

pytestmark = pytest.mark.integration


def tasks(count: int, payload_size: int = 10) -> list[TaskMessage]:
    return [
        TaskMessage(
            job_id="job-1",
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
