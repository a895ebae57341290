"""The count of dead letters waiting for the archive, on the project's emulator: what the
console's overview asks every few seconds, with the receiver it keeps open between counts."""

from __future__ import annotations

from typing import Any

import pytest
from azure.servicebus import ServiceBusClient

from shared.adapters.servicebus_waiting import ServiceBusDeadLetterCounter

from .servicebus import dead_letter_session, send_tasks, tasks

pytestmark = pytest.mark.integration


def test_each_count_counts_from_the_first_dead_letter_and_stops_at_the_bound(
    servicebus_client: ServiceBusClient, session_queue: str
) -> None:
    counter = ServiceBusDeadLetterCounter(servicebus_client)
    try:
        assert counter.waiting(session_queue, up_to=1000) == 0
        send_tasks(servicebus_client, session_queue, "s/1", tasks("job-w1", 3))
        dead_letter_session(servicebus_client, session_queue, "s/1", lambda m: ("R", "d"))

        # The same receiver answers each count: none goes on from where the last one stopped.
        assert counter.waiting(session_queue, up_to=1000) == 3
        assert counter.waiting(session_queue, up_to=1000) == 3
        assert counter.waiting(session_queue, up_to=2) == 2

        send_tasks(servicebus_client, session_queue, "s/2", tasks("job-w2", 2))
        dead_letter_session(servicebus_client, session_queue, "s/2", lambda m: ("R", "d"))
        assert counter.waiting(session_queue, up_to=1000) == 5
    finally:
        counter.close()


class CountingClient:
    """The client, counting the receivers it opens."""

    def __init__(self, client: ServiceBusClient) -> None:
        self._client = client
        self.receivers = 0

    def get_queue_receiver(self, *args: Any, **kwargs: Any) -> Any:
        self.receivers += 1
        return self._client.get_queue_receiver(*args, **kwargs)


def test_counts_share_one_receiver_per_queue(
    servicebus_client: ServiceBusClient, session_queue: str
) -> None:
    # Opening and closing a receiver is about a second of the SDK's; the console asks every
    # five seconds, for each session queue.
    client = CountingClient(servicebus_client)
    counter = ServiceBusDeadLetterCounter(client)  # type: ignore[arg-type]
    try:
        for _ in range(3):
            assert counter.waiting(session_queue, up_to=1000) == 0
    finally:
        counter.close()

    assert client.receivers == 1
