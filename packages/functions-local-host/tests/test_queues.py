"""Storage queue triggers: base64 messages, QueueMessage fields, retries and the poison queue."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from azure.storage.queue import QueueClient

from functions_local_host import LocalHost
from local_host_testing import wait_for


@pytest.fixture
def queue_name() -> str:
    return f"q{uuid.uuid4().hex[:12]}"


@pytest.fixture
def storage(
    run_host: Callable[..., LocalHost], azurite_connection_string: str, queue_name: str
) -> str:
    """Azurite's connection string, with the host running ``storage_queue`` on ``queue_name``."""
    run_host(
        ["storage_queue"],
        settings={"STORAGE_QUEUE": queue_name, "AzureWebJobsStorage": azurite_connection_string},
    )
    return azurite_connection_string


def send(connection_string: str, queue: str, text: str) -> None:
    client = QueueClient.from_connection_string(connection_string, queue)
    client.send_message(base64.b64encode(text.encode()).decode())


def test_a_message_reaches_the_function_decoded_and_is_deleted(
    storage: str, queue_name: str, seen: Any
) -> None:
    send(storage, queue_name, "hello")
    (call,) = wait_for(lambda: seen.of("storage_queue"), what="the queue message")
    assert call["body"] == "hello"
    assert call["dequeue_count"] == 1
    assert call["type"] == "QueueMessage"
    assert call["id"] and call["insertion_time"] is not None
    client = QueueClient.from_connection_string(storage, queue_name)
    wait_for(
        lambda: client.get_queue_properties().approximate_message_count == 0,
        what="the message deleted",
    )


def test_a_failing_message_is_retried_then_moved_to_the_poison_queue(
    storage: str, queue_name: str, seen: Any
) -> None:
    # host.json (FAST_HOST_JSON) sets maxDequeueCount 3 and visibilityTimeout 0.
    send(storage, queue_name, "fail please")
    poison = QueueClient.from_connection_string(storage, f"{queue_name}-poison")
    (moved,) = wait_for(lambda: list(poison.peek_messages()), timeout=15, what="the poison message")
    assert base64.b64decode(moved.content).decode() == "fail please"
    assert [c["dequeue_count"] for c in seen.of("storage_queue")] == [1, 2, 3]
    main = QueueClient.from_connection_string(storage, queue_name)
    assert main.get_queue_properties().approximate_message_count == 0
