"""Service Bus adapters for the archive and replay: the dead-letter reader, the raw resender
and the session seeder, all on the azure-servicebus SDK."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from azure.servicebus import (
    ServiceBusClient,
    ServiceBusReceivedMessage,
    ServiceBusReceiver,
    ServiceBusSubQueue,
)
from azure.servicebus.exceptions import MessageSizeExceededError

from ..domain.envelope import body_bytes, plain_properties
from ..domain.errors import SERVICE_BUS
from ..service_layer.ports import DeadLetter, OutgoingMessage
from .azure_errors import translated
from .servicebus_sender import SenderPool, to_service_bus_message

# How long a receive waits for a dead letter before taking the sub-queue for empty (the
# default of DLQ_ARCHIVE_RECEIVE_WAIT_SECONDS): every archive run ends on one such wait per queue.
RECEIVE_WAIT_SECONDS = 2.0
# Service Bus writes the reason and description into the application properties of a dead
# letter. They are kept in their own fields; left in the properties they would travel with a
# replay, and the SDK would report the old reason on the replayed message.
DEAD_LETTER_PROPERTIES = frozenset({"DeadLetterReason", "DeadLetterErrorDescription"})


class ServiceBusDeadLetterReader:
    def __init__(
        self, queue: str, receiver: ServiceBusReceiver, *, wait: float = RECEIVE_WAIT_SECONDS
    ) -> None:
        self._queue = queue
        self._receiver = receiver
        self._wait = wait

    @translated(SERVICE_BUS)
    def receive(self, max_messages: int) -> list[DeadLetter]:
        messages = self._receiver.receive_messages(
            max_message_count=max_messages, max_wait_time=self._wait
        )
        return [self._letter(message) for message in messages]

    @translated(SERVICE_BUS)
    def complete(self, letters: Sequence[DeadLetter]) -> None:
        for letter in letters:
            self._receiver.complete_message(letter.handle)

    def _letter(self, message: ServiceBusReceivedMessage) -> DeadLetter:
        return DeadLetter(
            queue=self._queue,
            session_id=message.session_id,
            sequence_number=message.sequence_number or 0,
            message_id=message.message_id,
            body=body_bytes(message.body),
            content_type=message.content_type,
            application_properties={
                name: value
                for name, value in plain_properties(message.application_properties).items()
                if name not in DEAD_LETTER_PROPERTIES
            },
            reason=message.dead_letter_reason,
            description=message.dead_letter_error_description,
            enqueued_time=message.enqueued_time_utc,
            delivery_count=message.delivery_count,
            handle=message,
        )


class ServiceBusDeadLetterSource:
    """Peek-locks messages from ``<queue>/$DeadLetterQueue`` (never a session entity)."""

    def __init__(
        self, client: ServiceBusClient, *, receive_wait: float = RECEIVE_WAIT_SECONDS
    ) -> None:
        self._client = client
        self._receive_wait = receive_wait

    @contextmanager
    def open(self, queue: str) -> Iterator[ServiceBusDeadLetterReader]:
        with self._client.get_queue_receiver(
            queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER, prefetch_count=0
        ) as receiver:
            yield ServiceBusDeadLetterReader(queue, receiver, wait=self._receive_wait)


class ServiceBusResender:
    """Sends raw messages under a session id, in order, in as few batches as fit."""

    def __init__(self, client: ServiceBusClient, senders: SenderPool | None = None) -> None:
        self._senders = senders or SenderPool(client)

    @translated(SERVICE_BUS)
    def resend(self, queue_name: str, session_id: str, messages: Sequence[OutgoingMessage]) -> None:
        if not messages:
            return
        with self._senders.sender(queue_name) as sender:
            batch = sender.create_message_batch()
            for outgoing in messages:
                message = to_service_bus_message(session_id, outgoing)
                try:
                    batch.add_message(message)
                except MessageSizeExceededError:
                    sender.send_messages(batch)
                    batch = sender.create_message_batch()
                    batch.add_message(message)  # a single message too large raises here
            sender.send_messages(batch)


class ServiceBusSessionSeeder:
    """Sets the state of a session before its first message is sent."""

    def __init__(self, client: ServiceBusClient) -> None:
        self._client = client

    @translated(SERVICE_BUS)
    def seed(self, queue_name: str, session_id: str, state: bytes) -> None:
        """Set the state unless the session has one already. A replay repeated after a crash
        between sending and marking the rows seeds again, and by then the processor may be
        half-way through the session: overwriting its state would rewind it."""
        with self._client.get_queue_receiver(
            queue_name, session_id=session_id, max_wait_time=5
        ) as receiver:
            session = receiver.session
            if not session.get_state():
                session.set_state(state)
