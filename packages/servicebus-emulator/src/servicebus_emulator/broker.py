"""Service Bus semantics, free of AMQP: sending, delivering, settling, and the broker's clock.

Everything runs on the event loop's thread, so no operation needs a lock: each one is a plain
method call that finishes before the next frame is read. Delivery is push-based: a receiver
link registers as a :class:`Consumer`, and whenever a message or credit appears the entity
"pumps" messages to the consumers that can take them.

The parts, each with one job: :class:`Entities` (what exists), :class:`MessageLocks`,
:class:`SessionLocks`, :class:`Timers` (scheduling and expiry) and :class:`DeadLetters`; the
broker composes them into the operations a link or a management request performs.
"""

from __future__ import annotations

import heapq
import logging
import uuid
from collections import Counter
from collections.abc import Iterable
from typing import Any

from .catalog import Catalog
from .clock import now_ms
from .config import NamespaceConfig
from .dead_letters import DeadLetters
from .entities import TOPIC, Consumer, Entities, Entity
from .errors import (
    MessageNotFound,
    NotAllowed,
)
from .message import ACTIVE, DEFERRED, SCHEDULED, Incoming, Message
from .message_locks import MessageLocks
from .recovery import restore
from .routing import Router
from .session_locks import SessionLocks, deliverable
from .store import MemoryStore, SqliteStore, Store
from .timers import Timers

log = logging.getLogger(__name__)

MAX_MESSAGE_SIZE = 1024 * 1024
Changes = dict[str, Any] | None  # application properties a settlement modifies


class Operations:
    """What clients asked of each entity, by kind, since the broker started: what a namespace
    in Azure would have to carry (docs/capacity.md). ``GET /operations`` on the status port."""

    def __init__(self) -> None:
        self._counts: Counter[tuple[str, str]] = Counter()

    def count(self, entity: Entity | None, kind: str, n: int = 1) -> None:
        self._counts[(entity.name if entity is not None else "", kind)] += n

    def snapshot(self) -> dict[str, dict[str, int]]:
        found: dict[str, dict[str, int]] = {}
        for (entity, kind), n in sorted(self._counts.items()):
            found.setdefault(entity, {})[kind] = n
        return found


class Broker:
    def __init__(self, namespace: NamespaceConfig, store: Store | None = None) -> None:
        self.operations = Operations()
        self.store: Store = store or MemoryStore()
        self.entities = Entities(namespace)
        self.timers = Timers()
        self.locks = MessageLocks(self.timers, self.store)
        self.sessions = SessionLocks(self.timers, self.store, self.redeliver)
        self.dead_letters = DeadLetters(
            self.entities,
            self.store,
            send=self.send,
            make_available=self._make_available,
            remove=self._remove,
        )
        self.router = Router(
            self.entities, self.store, self.timers, self.dead_letters, self.enqueue
        )
        self.catalog = Catalog(self.entities, self.locks, self.store)
        if isinstance(self.store, SqliteStore):
            self.catalog.replay()  # entities the management API changed, then their messages
            restore(self.store, self.entities, self.router, self.timers, self.redeliver)

    def entity(self, path: str) -> Entity:
        return self.entities.entity(path)

    # ------------------------------------------------------------------ sending

    def send(self, entity: Entity, incoming: Incoming, size: int) -> int | None:
        """Accept one message sent to a queue or a topic (routing.py); its sequence number, or
        None when duplicate detection dropped it."""
        return self.router.send(entity, incoming, size)

    def enqueue(
        self,
        entity: Entity,
        incoming: Incoming,
        size: int,
        topic_ttl_ms: int | None = None,
        available: bool = True,
    ) -> Message:
        """Store a message in a queue or subscription: active (offered to receivers unless
        ``available`` is false), or scheduled. Its time to live is its own, else the entity's
        default (Service Bus takes the lower of the two), the topic's default standing in for
        its own when it came through a topic."""
        now = now_ms()
        sequence = self.router.next_sequence(entity)
        own, default = incoming.ttl_ms or topic_ttl_ms, entity.config.default_ttl_ms
        ttl = min(own, default) if own and default else own or default
        scheduled = incoming.scheduled_at if (incoming.scheduled_at or 0) > now else None
        enqueued = scheduled or now
        message = incoming.stored(
            sequence, enqueued, enqueued + ttl if ttl else None, SCHEDULED if scheduled else ACTIVE
        )
        entity.messages[sequence] = message
        self.store.put(entity.store_key, message)
        if scheduled:
            self.timers.add(scheduled, "due", entity, sequence)
        elif available:
            self._make_available(entity, message)
        if message.expires_at is not None:
            self.timers.add(message.expires_at, "ttl", entity, sequence)
        return message

    def cancel_scheduled(self, entity: Entity, sequence_numbers: Iterable[int]) -> None:
        for sequence in sequence_numbers:
            message = entity.messages.get(sequence)
            if message is not None and message.state == SCHEDULED:
                self._remove(entity, message)

    # ------------------------------------------------------------------ receiving

    def attach(self, entity: Entity, consumer: Consumer) -> None:
        if entity.requires_session:
            raise NotAllowed(
                f"It is not possible for an entity that requires sessions ('{entity.name}') "
                "to create a non-sessionful message receiver. Use a session receiver."
            )
        entity.consumers.append(consumer)

    def detach(self, entity: Entity, consumer: Consumer) -> None:
        if consumer in entity.consumers:
            entity.consumers.remove(consumer)
        self.sessions.detach(entity, consumer)

    def pump(self, entity: Entity, session_id: str | None = None) -> None:
        """Deliver available messages to consumers that have credit."""
        if entity.requires_session:
            sessions = (
                [entity.sessions[session_id]]
                if session_id is not None and session_id in entity.sessions
                else [s for s in entity.sessions.values() if s.owner is not None]
            )
            for session in sessions:
                consumer = session.owner
                while consumer is not None and consumer.credit > 0:
                    message = self._pop(entity, session.available)
                    if message is None:
                        break
                    self._hand_over(entity, message, consumer, session.locked_until)
            return
        consumers = entity.consumers
        while consumers:
            progressed = False
            for consumer in list(consumers):
                if consumer.credit <= 0:
                    continue
                message = self._pop(entity, entity.available)
                if message is None:
                    return
                self._hand_over(
                    entity, message, consumer, now_ms() + entity.config.lock_duration_ms
                )
                progressed = True
            if not progressed:
                return

    def peek(
        self, entity: Entity, from_sequence: int, count: int, session_id: str | None
    ) -> list[Message]:
        found = []
        for sequence in sorted(s for s in entity.messages if s >= from_sequence):
            message = entity.messages[sequence]
            if session_id is not None and message.session_id != session_id:
                continue
            found.append(message)
            if len(found) >= count:
                break
        return found

    def receive_deferred(
        self,
        entity: Entity,
        sequence_numbers: list[int],
        session_id: str | None,
        link_name: str | None,
        owner: Consumer | None,
        receive_and_delete: bool,
    ) -> list[tuple[Message, uuid.UUID | None, int]]:
        if session_id is not None:
            self.sessions.owned(entity, session_id, link_name)
        found = []
        for sequence in sequence_numbers:
            message = entity.messages.get(sequence)
            if (
                message is None
                or message.state != DEFERRED
                or (session_id is not None and message.session_id != session_id)
            ):
                raise MessageNotFound(
                    f"Failed to retrieve the deferred message with sequence number {sequence}."
                )
            found.append(message)
        result: list[tuple[Message, uuid.UUID | None, int]] = []
        for message in found:
            if receive_and_delete:
                self._remove(entity, message)
                result.append((message, None, 0))
                continue
            locked_until = now_ms() + entity.config.lock_duration_ms
            token = self.locks.lock(entity, message, owner, locked_until)
            result.append((message, token, locked_until))
        self.store.commit()
        return result

    # ------------------------------------------------------------------ settlement

    def complete(self, token: uuid.UUID, session_id: str | None = None) -> None:
        entity, message = self.locks.find(token, session_id)
        self._remove(entity, message)
        self.store.commit()

    def release(self, token: uuid.UUID) -> None:
        """Unlock without counting a delivery (a receiver gave back a prefetched message)."""
        found = self.locks.held(token)
        if found is not None:
            entity, message = found
            self.locks.drop(entity, message)
            self.store.locked(entity.store_key, message.sequence_number, False)
            if message.state == ACTIVE:
                self._make_available(entity, message)
            self.store.commit()

    def abandon(
        self, token: uuid.UUID, session_id: str | None = None, properties: Changes = None
    ) -> None:
        """Give the message back (its delivery counts)."""
        self.redeliver(*self._settling(token, session_id, properties))
        self.store.commit()

    def defer(
        self, token: uuid.UUID, session_id: str | None = None, properties: Changes = None
    ) -> None:
        entity, message = self._settling(token, session_id, properties)
        self.locks.drop(entity, message)
        message.state = DEFERRED
        self.store.put(entity.store_key, message)
        self.store.commit()

    def dead_letter(
        self,
        token: uuid.UUID,
        reason: str | None,
        description: str | None,
        session_id: str | None = None,
        properties: Changes = None,
    ) -> None:
        entity, message = self._settling(token, session_id, properties)
        self.locks.drop(entity, message)
        self.dead_letters.move(entity, message, reason, description)
        self.store.commit()

    def _settling(
        self, token: uuid.UUID, session_id: str | None, properties: Changes
    ) -> tuple[Entity, Message]:
        """The message a live lock holds, with the application properties a settlement
        modifies on the way (the SDKs' propertiesToModify) set."""
        entity, message = self.locks.find(token, session_id)
        if properties:
            message.set_properties(properties)
        return entity, message

    # ------------------------------------------------------------------ the clock

    def tick(self) -> None:
        """Run every timer that is due: lock and session-lock expiry, scheduled messages, TTL."""
        now = now_ms()
        for kind, entity, sequence, session_id in self.timers.pop_due(now):
            if kind == "session":
                self.sessions.expire(entity, session_id, now)
                continue
            message = entity.messages.get(sequence)
            if message is None:
                continue
            if kind == "lock" and message.lock_token is not None and message.locked_until <= now:
                if message.session_id is None or not entity.requires_session:
                    self.redeliver(entity, message)
            elif kind == "due" and message.state == SCHEDULED and entity.kind == TOPIC:
                self.router.due(entity, message)
            elif kind == "due" and message.state == SCHEDULED:
                message.state = ACTIVE
                self.store.put(entity.store_key, message)
                self._make_available(entity, message)
            elif kind == "ttl" and message.expires_at is not None and message.expires_at <= now:
                if message.lock_token is not None:  # expires once its lock ends
                    self.timers.add(message.locked_until + 1, "ttl", entity, sequence)
                    continue
                self.dead_letters.expire(entity, message)
        self.store.commit()

    def counts(self) -> dict[str, dict[str, int]]:
        return self.entities.counts()

    # ------------------------------------------------------------------ internals

    def _pop(self, entity: Entity, heap: list[int]) -> Message | None:
        while heap:
            message = entity.messages.get(heap[0])
            heapq.heappop(heap)
            if message is not None and deliverable(message):
                if message.expires_at is not None and message.expires_at <= now_ms():
                    self.dead_letters.expire(entity, message)
                    continue
                return message
        return None

    def _make_available(self, entity: Entity, message: Message) -> None:
        if entity.requires_session and message.session_id is not None:
            session = entity.session(message.session_id)
            heapq.heappush(session.available, message.sequence_number)
            if session.owner is not None:
                self.pump(entity, session.id)
            elif entity.waiters:
                self.sessions.offer(entity)
        else:
            heapq.heappush(entity.available, message.sequence_number)
            if entity.consumers:
                self.pump(entity)

    def _hand_over(
        self, entity: Entity, message: Message, consumer: Consumer, locked_until: int
    ) -> None:
        if consumer.receive_and_delete:
            self.operations.count(entity, "receive")
            self._remove(entity, message)
            consumer.deliver(message, None, 0)
            return
        token = self.locks.lock(entity, message, consumer, locked_until)
        self.operations.count(entity, "receive")
        consumer.deliver(message, token, locked_until)

    def redeliver(self, entity: Entity, message: Message) -> None:
        """A delivery that ended unsettled (abandon, lock expiry): count it, then make the
        message available again, or dead-letter it at MaxDeliveryCount."""
        self.locks.drop(entity, message)
        message.delivery_count += 1
        if self.dead_letters.max_delivery_count_exceeded(entity, message):
            return
        self.store.put(entity.store_key, message)
        if message.state == ACTIVE:
            self._make_available(entity, message)

    def _remove(self, entity: Entity, message: Message) -> None:
        self.locks.drop(entity, message)
        entity.messages.pop(message.sequence_number, None)
        self.store.delete(entity.store_key, message.sequence_number)
