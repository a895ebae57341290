"""How many dead letters wait in a queue's dead-letter sub-queue for the archive timer: counted
by peeking (nothing is locked or moved), up to a bound so a flood costs bounded reads."""

from __future__ import annotations

from azure.servicebus import ServiceBusClient, ServiceBusSubQueue

from .azure_errors import SERVICE_BUS, translated

_PEEK_BATCH = 250


class ServiceBusDeadLetterCounter:
    """Implements DeadLetterCounter."""

    def __init__(self, client: ServiceBusClient) -> None:
        self._client = client

    @translated(SERVICE_BUS)
    def waiting(self, queue: str, *, up_to: int) -> int:
        """Dead letters in ``queue``'s dead-letter sub-queue, at most ``up_to``."""
        counted = 0
        with self._client.get_queue_receiver(
            queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER
        ) as receiver:
            while counted < up_to:
                batch = receiver.peek_messages(max_message_count=min(_PEEK_BATCH, up_to - counted))
                if not batch:
                    break
                counted += len(batch)
        return counted
