"""Task messages onto a session-enabled Service Bus queue."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusMessageBatch,
    ServiceBusSender,
)
from azure.servicebus.exceptions import (
    MessageSizeExceededError,
    OperationTimeoutError,
    ServiceBusError,
)

from ..domain.envelope import CONTENT_TYPE, TaskMessage
from ..domain.errors import SERVICE_BUS, SendUnconfirmed, SessionTooLarge
from ..service_layer.ports import OutgoingMessage
from ..telemetry.context import sending_trace_properties
from .azure_errors import translated


class SenderPool:
    """One open ``ServiceBusSender`` per queue, reused by every invocation of the worker.

    Opening and closing a sender costs the SDK about a second (connection, CBS token, link
    attach, each polled), sending on an open one a few milliseconds; Microsoft's guidance is
    to reuse senders. A sender is not thread-safe, so each has a lock (the Python worker runs
    functions on a thread pool). A sender that raised a Service Bus error is closed and
    dropped; the next send opens a new one.
    """

    def __init__(self, client: ServiceBusClient) -> None:
        self._client = client
        self._senders: dict[str, tuple[ServiceBusSender, threading.Lock]] = {}
        self._guard = threading.Lock()

    @contextlib.contextmanager
    def sender(self, queue_name: str) -> Iterator[ServiceBusSender]:
        with self._guard:
            entry = self._senders.get(queue_name)
            if entry is None:
                entry = (self._client.get_queue_sender(queue_name), threading.Lock())
                self._senders[queue_name] = entry
        sender, lock = entry
        with lock:
            try:
                yield sender
            except ServiceBusError:
                self._drop(queue_name, entry)
                raise

    def close(self) -> None:
        with self._guard:
            entries = list(self._senders.items())
        for queue_name, entry in entries:
            self._drop(queue_name, entry)

    def _drop(self, queue_name: str, entry: tuple[ServiceBusSender, threading.Lock]) -> None:
        with self._guard:
            if self._senders.get(queue_name) is entry:
                del self._senders[queue_name]
        with contextlib.suppress(Exception):
            entry[0].close()


class ServiceBusTaskSender:
    def __init__(self, client: ServiceBusClient, senders: SenderPool | None = None) -> None:
        self._senders = senders or SenderPool(client)

    @translated(SERVICE_BUS)
    def send_session(
        self, queue_name: str, session_id: str, messages: Sequence[TaskMessage]
    ) -> None:
        """Send the messages in order as one batch: the queue gets all of them or none.
        Raises ``SessionTooLarge`` (sending nothing) when they do not fit in one batch."""
        if not messages:
            return
        with self._senders.sender(queue_name) as sender:
            batch = sender.create_message_batch()
            fill_batch(batch, session_id, messages)
            try:
                sender.send_messages(batch)
            except OperationTimeoutError as error:
                # The batch may have reached the queue: only the confirmation is missing.
                raise SendUnconfirmed(type(error).__name__) from error


def to_service_bus_message(
    session_id: str,
    message: TaskMessage | OutgoingMessage,
    *,
    message_id: str | None = None,
    trace_context: Mapping[str, str] | None = None,
) -> ServiceBusMessage:
    """The one way a message is put on a queue. A task's body is the task as JSON, its routing
    fields repeated as application properties, and its message id deterministic so duplicate
    detection catches a re-send: ``message.message_id()`` (job:step) unless the caller knows a
    better one, e.g. job:row for an import whose job spans several sessions. An
    ``OutgoingMessage`` (a replayed dead letter) goes as it is, byte for byte. Sent inside a
    span, a message carries its trace context (``traceparent``, ``Diagnostic-Id``,
    ``tracestate``), replacing a replayed one's: its task then runs in that span's trace.
    ``trace_context`` (``telemetry.context.trace_properties`` of a span) is carried instead of
    the current span's, by a sender whose span is not current in its process (a Spark
    executor sending in its job's trace)."""
    if isinstance(message, TaskMessage):
        message = OutgoingMessage(
            body=message.to_json(),
            message_id=message_id or message.message_id(),
            content_type=CONTENT_TYPE,
            application_properties=message.application_properties(),
        )
    properties: dict[str | bytes, Any] = dict(message.application_properties.items())
    properties.update(sending_trace_properties() if trace_context is None else trace_context)
    return ServiceBusMessage(
        message.body,
        session_id=session_id,
        message_id=message_id or message.message_id,
        application_properties=properties,
        content_type=message.content_type,
    )


def fill_batch(
    batch: ServiceBusMessageBatch, session_id: str, messages: Sequence[TaskMessage]
) -> None:
    """Add the messages to ``batch`` in order, or raise ``SessionTooLarge``."""
    for index, message in enumerate(messages):
        try:
            batch.add_message(to_service_bus_message(session_id, message))
        except MessageSizeExceededError as error:
            raise SessionTooLarge(
                f"Session {session_id} has {len(messages)} messages but only {index} fit in "
                f"one Service Bus batch of {batch.max_size_in_bytes} bytes, so nothing was "
                "sent. Split the job into smaller sessions (fewer rows per import)."
            ) from error
