"""How many dead letters wait in a queue's dead-letter sub-queue for the archive timer: counted
by peeking (nothing is locked or moved), up to a bound so a flood costs bounded reads."""

from __future__ import annotations

import contextlib
import threading

from azure.servicebus import ServiceBusClient, ServiceBusReceiver, ServiceBusSubQueue
from azure.servicebus.exceptions import ServiceBusError

from ..domain.errors import SERVICE_BUS
from .azure_errors import translated

_PEEK_BATCH = 250


class ServiceBusDeadLetterCounter:
    """Implements DeadLetterCounter.

    One receiver per dead-letter sub-queue, opened on first use and kept: opening and closing
    one costs the SDK about a second (link attach and detach, each polled), a peek on an open
    one a few milliseconds, and the console asks every 5 seconds. A receiver is not
    thread-safe, so each has a lock. One that raised a Service Bus error is closed and dropped;
    the next count opens a new one.
    """

    def __init__(self, client: ServiceBusClient) -> None:
        self._client = client
        self._receivers: dict[str, tuple[ServiceBusReceiver, threading.Lock]] = {}
        self._guard = threading.Lock()

    @translated(SERVICE_BUS)
    def waiting(self, queue: str, *, up_to: int) -> int:
        """Dead letters in ``queue``'s dead-letter sub-queue, at most ``up_to``."""
        with self._guard:
            entry = self._receivers.get(queue)
            if entry is None:
                receiver = self._client.get_queue_receiver(
                    queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER
                )
                entry = self._receivers[queue] = (receiver, threading.Lock())
        receiver, lock = entry
        with lock:
            try:
                return _count(receiver, up_to)
            except ServiceBusError:
                self._drop(queue, entry)
                raise

    def close(self) -> None:
        with self._guard:
            entries = list(self._receivers.items())
        for queue, entry in entries:
            self._drop(queue, entry)

    def _drop(self, queue: str, entry: tuple[ServiceBusReceiver, threading.Lock]) -> None:
        with self._guard:
            if self._receivers.get(queue) is entry:
                del self._receivers[queue]
        with contextlib.suppress(Exception):
            entry[0].close()


def _count(receiver: ServiceBusReceiver, up_to: int) -> int:
    # Each peek names where it starts: without it the SDK goes on from the receiver's last
    # peek, which a kept receiver would carry over from the count before.
    counted, start = 0, 1
    while counted < up_to:
        batch = receiver.peek_messages(
            max_message_count=min(_PEEK_BATCH, up_to - counted), sequence_number=start
        )
        if not batch:
            break
        counted += len(batch)
        start = max(m.sequence_number or 0 for m in batch) + 1
    return counted
