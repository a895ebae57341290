"""One test body for both SDK clients.

Every conformance test is an ``async def`` that talks to ``bus``: with the sync client
(``azure.servicebus.ServiceBusClient``) its calls return plain values and its handlers are plain
context managers; with the async one (``azure.servicebus.aio``) they are awaitables and async
context managers. ``result`` and ``opened`` accept both, so the same public SDK calls run in
both flavours without a second copy of each test.
"""

from __future__ import annotations

import contextlib
import inspect
import time
import uuid
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceivedMessage,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
)
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.aio.management import (
    ServiceBusAdministrationClient as AsyncAdministrationClient,
)
from azure.servicebus.management import ServiceBusAdministrationClient

# Every message a test sends carries its test's tag, so a test only ever counts its own messages
# and clears away what an earlier, failed test left behind.
TAG = "conformance-test"


async def result(value: Any) -> Any:
    """The value of an SDK call: awaited for the async client, as is for the sync one."""
    if inspect.isawaitable(value):
        return await value
    return value


@asynccontextmanager
async def opened(handler: Any) -> AsyncIterator[Any]:
    """Enter a client, sender or receiver of either flavour; close it on the way out."""
    if hasattr(handler, "__aenter__"):
        async with handler as entered:
            yield entered
    else:
        with handler as entered:
            yield entered


@dataclass(frozen=True)
class Queues:
    """The queues of tests/config.json, which a real namespace must also have."""

    plain: str = "conformance-plain"
    sessions: str = "conformance-sessions"
    sessions_short_lock: str = "conformance-sessions-short-lock"  # LockDuration PT5S
    sessions_idle: str = "conformance-sessions-idle"  # empty between tests
    duplicates: str = "conformance-duplicates"  # RequiresDuplicateDetection
    short_lock: str = "conformance-short-lock"  # LockDuration PT5S, MaxDeliveryCount 3
    expiring: str = "conformance-expiring"  # DefaultMessageTimeToLive PT3S, dead-letter on expiry
    forward_dead_letters: str = "conformance-forward-dead-letters"  # dead letters -> the next
    dead_letter_target: str = "conformance-dead-letter-target"
    duplicates_short_window: str = "conformance-duplicates-short-window"  # window PT20S


@dataclass(frozen=True)
class Topic:
    """A topic of tests/config.json (sent to with a topic sender)."""

    name: str

    def subscription(self, name: str) -> Subscription:
        return Subscription(self.name, name)


class Subscription(NamedTuple):
    """A topic's subscription (received from with a subscription receiver)."""

    topic: str
    name: str


@dataclass(frozen=True)
class Topics:
    """The topics of tests/config.json and what their subscriptions select."""

    # all ($Default), red (color = 'red'), fields (one correlation rule per field), both
    # (CorrelationId and Label), sql (a SQL filter and action), copies (rules with actions)
    main: Topic = Topic("conformance-topic")
    sessions: Topic = Topic("conformance-topic-sessions")  # sessions (RequiresSession), plain
    # to-queue (ForwardTo conformance-forwarded), kept (LockDuration PT5S, MaxDeliveryCount 2)
    forward: Topic = Topic("conformance-topic-forward")
    forwarded_queue: str = "conformance-forwarded"


SHORT_LOCK_SECONDS = 5
MAX_DELIVERY_COUNT = 3
DEFAULT_TTL_SECONDS = 3
SHORT_DUPLICATE_WINDOW_SECONDS = 20  # the least Service Bus accepts


@dataclass(frozen=True)
class Bus:
    """A Service Bus namespace as one flavour of the SDK sees it."""

    kind: str  # "sync" or "async"
    connection_string: str
    management: tuple[str, int] | None = None  # the emulator's HTTP host and port

    @asynccontextmanager
    async def administration(self) -> AsyncIterator[Any]:
        """The SDK's administration client. For the emulator, with no more than the override
        Microsoft's emulator documentation gives for Python: the HTTP port in the connection
        string, and the client's base URL set to http://host:port."""
        cls = ServiceBusAdministrationClient if self.kind == "sync" else AsyncAdministrationClient
        if self.management is None:
            client = cls.from_connection_string(self.connection_string)
        else:
            host, port = self.management
            client = cls.from_connection_string(
                f"Endpoint=sb://{host}:{port};SharedAccessKeyName=RootManageSharedAccessKey;"
                "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"
            )
            client._impl._client._base_url = f"http://{host}:{port}"
        async with opened(client) as admin:
            yield admin

    def client(self, **kwargs: Any) -> Any:
        # No retries: a retried failure would hide exactly what these tests look for.
        kwargs.setdefault("retry_total", 0)
        kwargs.setdefault("retry_backoff_factor", 0.1)
        cls = ServiceBusClient if self.kind == "sync" else AsyncServiceBusClient
        return cls.from_connection_string(self.connection_string, **kwargs)

    @asynccontextmanager
    async def sender(self, entity: str | Topic) -> AsyncIterator[Any]:
        """A sender to a queue (by name) or a topic."""
        async with opened(self.client()) as client:
            if isinstance(entity, Topic):
                handler = client.get_topic_sender(entity.name)
            else:
                handler = client.get_queue_sender(entity)
            async with opened(handler) as sender:
                yield sender

    @asynccontextmanager
    async def receiver(self, entity: str | Subscription, **kwargs: Any) -> AsyncIterator[Any]:
        """A receiver of a queue (by name) or a subscription."""
        kwargs.setdefault("max_wait_time", 2)
        async with opened(self.client()) as client:
            if isinstance(entity, Subscription):
                handler = client.get_subscription_receiver(entity.topic, entity.name, **kwargs)
            else:
                handler = client.get_queue_receiver(entity, **kwargs)
            async with opened(handler) as receiver:
                yield receiver

    async def send(self, entity: str | Topic, messages: Any) -> None:
        async with self.sender(entity) as sender:
            await result(sender.send_messages(messages))

    async def take(
        self,
        entity: str | Subscription,
        tag: Tag,
        count: int,
        *,
        dead_letters: bool = False,
        exactly: bool = False,
        timeout: float = 10.0,
    ) -> list[Any]:
        """Receive-and-delete ``count`` messages of this test (from the dead-letter sub-queue
        with ``dead_letters``). With ``exactly`` it then waits a second for one more, which
        the caller's assertion on the list then shows."""
        async with self.receiver(
            entity,
            sub_queue=ServiceBusSubQueue.DEAD_LETTER if dead_letters else None,
            receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE,
        ) as receiver:
            found = await tag.receive(receiver, count, timeout=timeout)
            if exactly:
                found += await tag.receive(receiver, 1, timeout=1)
        return found


@dataclass(frozen=True)
class Tag:
    """One test's mark. Every message a test sends carries it (application property ``TAG``),
    so the test receives and counts only its own messages and clears away what an earlier,
    failed run left behind."""

    id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def __str__(self) -> str:
        return self.id

    def message(self, body: str | bytes = "", **kwargs: Any) -> ServiceBusMessage:
        """A message of this test."""
        properties = {TAG: self.id, **kwargs.pop("application_properties", {})}
        return ServiceBusMessage(body or self.id, application_properties=properties, **kwargs)

    def owns(self, message: Any) -> bool:
        return tag_of(message) == self.id

    async def receive(self, receiver: Any, count: int, *, timeout: float = 10.0) -> list[Any]:
        """Receive until ``count`` messages of this test arrived or ``timeout`` passed.

        Messages of other tests (leftovers of a failed run) are completed when the receiver is
        in peek-lock mode, so they cannot come back; in receive-and-delete mode they are gone.
        """
        mine: list[Any] = []
        deadline = time.monotonic() + timeout
        while len(mine) < count and time.monotonic() < deadline:
            wait = max(0.5, min(2.0, deadline - time.monotonic()))
            batch = await result(
                receiver.receive_messages(max_message_count=count - len(mine), max_wait_time=wait)
            )
            for message in batch:
                if self.owns(message):
                    mine.append(message)
                else:
                    # In receive-and-delete mode the SDK refuses to settle: already gone.
                    with contextlib.suppress(ValueError):
                        await result(receiver.complete_message(message))
        return mine

    async def peek(self, receiver: Any, *, max_count: int = 250) -> list[Any]:
        """Every message of this test that a peek from the start of the entity shows."""
        found: list[Any] = []
        sequence_number = 1  # 0 would mean "after the last one this receiver saw"
        while True:
            page = await result(
                receiver.peek_messages(max_message_count=50, sequence_number=sequence_number)
            )
            if not page:
                return found
            found.extend(m for m in page if self.owns(m))
            sequence_number = page[-1].sequence_number + 1
            if len(found) >= max_count:
                return found


def tag_of(message: ServiceBusReceivedMessage) -> str | None:
    properties = message.application_properties or {}
    value = properties.get(TAG.encode(), properties.get(TAG))
    return value.decode() if isinstance(value, bytes) else str(value) if value else None


def body_of(message: ServiceBusReceivedMessage) -> bytes:
    return b"".join(message.body)


def ids(messages: Iterable[ServiceBusReceivedMessage]) -> list[str]:
    return [str(m.message_id) for m in messages]
