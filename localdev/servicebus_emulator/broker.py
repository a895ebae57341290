"""Service Bus semantics, free of AMQP: queues, sessions, locks, settlement, timers.

Everything runs on the event loop's thread, so no operation needs a lock: each one is a plain
method call that finishes before the next frame is read. Delivery is push-based: a receiver
link registers as a :class:`Consumer`, and whenever a message or credit appears the entity
"pumps" messages to the consumers that can take them.
"""

from __future__ import annotations

import heapq
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from .config import QueueConfig
from .message import ACTIVE, DEFERRED, SCHEDULED, Incoming, Message
from .store import MemoryStore, SqliteStore, Store

log = logging.getLogger(__name__)

MAX_MESSAGE_SIZE = 1024 * 1024


def now_ms() -> int:
    return int(time.time() * 1000)


class BrokerError(Exception):
    """A failure Service Bus reports with an AMQP condition (the SDK maps it to an exception)."""

    condition = "com.microsoft:argument-error"
    status = 400

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


class EntityNotFound(BrokerError):
    condition, status = "amqp:not-found", 404


class MessageLockLost(BrokerError):
    condition, status = "com.microsoft:message-lock-lost", 410


class SessionLockLost(BrokerError):
    condition, status = "com.microsoft:session-lock-lost", 410


class SessionCannotBeLocked(BrokerError):
    condition, status = "com.microsoft:session-cannot-be-locked", 409


class MessageNotFound(BrokerError):
    condition, status = "com.microsoft:message-not-found", 404


class MessageTooLarge(BrokerError):
    condition, status = "amqp:link:message-size-exceeded", 413


class NotAllowed(BrokerError):
    condition, status = "amqp:not-allowed", 400


class Consumer(Protocol):
    """A receiver link, seen from the broker."""

    name: str
    session_id: str | None
    receive_and_delete: bool

    @property
    def credit(self) -> int: ...

    def deliver(self, message: Message, lock_token: uuid.UUID | None, locked_until: int) -> None:
        """Send one message (uses one credit)."""

    def session_lost(self, description: str) -> None:
        """The session lock expired: detach with session-lock-lost."""


@dataclass(eq=False)
class Session:
    id: str
    available: list[int] = field(default_factory=list)  # heap of sequence numbers
    state: bytes | None = None
    owner: Consumer | None = None
    locked_until: int = 0
    updated_at: int = 0
    locked: set[int] = field(default_factory=set)  # messages delivered under this lock


@dataclass(eq=False)
class Entity:
    """A queue, or a queue's dead-letter sub-queue (which never requires sessions)."""

    name: str
    config: QueueConfig
    requires_session: bool
    is_dead_letter: bool = False
    messages: dict[int, Message] = field(default_factory=dict)
    available: list[int] = field(default_factory=list)  # heap, non-session entities
    sessions: dict[str, Session] = field(default_factory=dict)
    consumers: list[Consumer] = field(default_factory=list)  # non-session receivers
    waiters: deque[tuple[Consumer, Callable[[Session], None]]] = field(default_factory=deque)
    dead_letter: Entity | None = None
    parent: Entity | None = None

    @property
    def queue(self) -> Entity:
        return self.parent or self

    @property
    def store_key(self) -> str:
        return self.queue.name

    def session(self, session_id: str) -> Session:
        found = self.sessions.get(session_id)
        if found is None:
            found = self.sessions[session_id] = Session(session_id)
        return found


class Broker:
    def __init__(self, queues: Iterable[QueueConfig], store: Store | None = None) -> None:
        self.store: Store = store or MemoryStore()
        self.entities: dict[str, Entity] = {}
        self.locks: dict[uuid.UUID, tuple[Entity, Message]] = {}
        self._sequence: dict[str, int] = {}
        self._duplicates: dict[str, dict[str, int]] = {}
        # (due, tiebreak, kind, entity, sequence number, session id): a heap
        self._timers: list[tuple[int, int, str, Entity, int, str]] = []
        self._tiebreak = 0
        self.wake: Callable[[], None] | None = None  # the timer loop sleeps until woken or due
        self.sleeping_until: int | None = None
        for config in queues:
            queue = Entity(config.name, config, requires_session=config.requires_session)
            queue.dead_letter = Entity(
                f"{config.name}/$DeadLetterQueue",
                config,
                requires_session=False,
                is_dead_letter=True,
                parent=queue,
            )
            self.entities[config.name.lower()] = queue
            self._sequence[config.name] = 0
            self._duplicates[config.name] = {}
        if isinstance(self.store, SqliteStore):
            self._load(self.store)

    # ------------------------------------------------------------------ lookup

    def entity(self, path: str) -> Entity:
        """``queue``, ``queue/$DeadLetterQueue`` (case-insensitive)."""
        parts = [part for part in path.strip("/").split("/") if part]
        if not parts:
            raise EntityNotFound("No entity path was given.")
        queue = self.entities.get(parts[0].lower())
        if queue is None:
            raise EntityNotFound(
                f"The messaging entity '{parts[0]}' could not be found. "
                "Add it to the emulator's config file."
            )
        rest = [part.lower() for part in parts[1:]]
        if not rest:
            return queue
        if rest in (["$deadletterqueue"], ["$transfer", "$deadletterqueue"]):
            assert queue.dead_letter is not None
            return queue.dead_letter
        raise EntityNotFound(f"The messaging entity '{path}' could not be found.")

    # ------------------------------------------------------------------ sending

    def send(self, entity: Entity, incoming: Incoming, size: int) -> int | None:
        """Enqueue (or schedule) one message; None when duplicate detection dropped it."""
        if size > MAX_MESSAGE_SIZE:
            raise MessageTooLarge(
                f"The received message (size {size} bytes) exceeds the limit "
                f"({MAX_MESSAGE_SIZE} bytes) currently allowed on the link."
            )
        if entity.is_dead_letter:
            raise NotAllowed("Messages cannot be sent to a dead-letter sub-queue.")
        config = entity.config
        now = now_ms()
        if entity.requires_session and not incoming.session_id:
            raise BrokerError(
                f"The SessionId was not set on a message, and it cannot be sent to the entity "
                f"'{entity.name}'. Entities that have session support enabled can only "
                "receive messages that have a non-empty SessionId."
            )
        if config.requires_duplicate_detection and incoming.message_id is not None:
            seen = self._duplicates[entity.name]
            expires = seen.get(incoming.message_id)
            if expires is not None and expires > now:
                return None
            expires_at = now + config.duplicate_detection_window_ms
            seen[incoming.message_id] = expires_at
            self.store.duplicate(entity.name, incoming.message_id, expires_at)
            if len(seen) > 10_000 and len(seen) % 1000 == 0:
                for key in [key for key, when in seen.items() if when <= now]:
                    del seen[key]
        sequence = self._sequence[entity.name] + 1
        self._sequence[entity.name] = sequence
        self.store.sequence(entity.name, sequence)
        ttl = incoming.ttl_ms or config.default_ttl_ms
        scheduled = incoming.scheduled_at if (incoming.scheduled_at or 0) > now else None
        enqueued = scheduled or now
        message = Message(
            sequence_number=sequence,
            message_id=incoming.message_id,
            session_id=incoming.session_id,
            enqueued_at=enqueued,
            ttl_ms=incoming.ttl_ms,
            expires_at=enqueued + ttl if ttl else None,
            annotations=incoming.annotations,
            properties=incoming.properties,
            application_properties=incoming.application_properties,
            body=incoming.body,
            header=incoming.header,
            state=SCHEDULED if scheduled else ACTIVE,
            scheduled_at=incoming.scheduled_at,
        )
        entity.messages[sequence] = message
        self.store.put(entity.store_key, message)
        if scheduled:
            self._timer(scheduled, "due", entity, sequence)
        else:
            self._make_available(entity, message)
        if message.expires_at is not None:
            self._timer(message.expires_at, "ttl", entity, sequence)
        return sequence

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
        entity.waiters = deque(w for w in entity.waiters if w[0] is not consumer)
        sid = consumer.session_id
        if sid is not None:
            session = entity.sessions.get(sid)
            if session is not None and session.owner is consumer:
                self._release_session(entity, session)

    def lock_session(
        self,
        entity: Entity,
        consumer: Consumer,
        session_id: str | None,
        on_locked: Callable[[Session], None],
    ) -> Session | None:
        """Lock a named session, or the next available one; None means wait (``on_locked``)."""
        if not entity.requires_session:
            raise NotAllowed(
                f"It is not possible for an entity that does not require sessions "
                f"('{entity.name}') to create a session receiver."
            )
        if session_id is not None:
            session = entity.session(session_id)
            if session.owner is not None and session.locked_until > now_ms():
                raise SessionCannotBeLocked(
                    f"The requested session '{session_id}' cannot be accepted. "
                    "It may be locked by another receiver."
                )
            if session.owner is not None:
                self._release_session(entity, session)
            self._lock(entity, session, consumer)
            return session
        free = self._free_session(entity)
        if free is not None:
            self._lock(entity, free, consumer)
            return free
        entity.waiters.append((consumer, on_locked))
        return None

    def stop_waiting(self, entity: Entity, consumer: Consumer) -> None:
        entity.waiters = deque(w for w in entity.waiters if w[0] is not consumer)

    def renew_session(self, entity: Entity, session_id: str, link_name: str | None) -> int:
        session = self._owned(entity, session_id, link_name)
        session.locked_until = now_ms() + entity.config.lock_duration_ms
        for sequence in session.locked:
            entity.messages[sequence].locked_until = session.locked_until
        self._timer(session.locked_until, "session", entity, 0, session_id)
        return session.locked_until

    def session_state(self, entity: Entity, session_id: str, link_name: str | None) -> bytes | None:
        return self._owned(entity, session_id, link_name).state

    def set_session_state(
        self, entity: Entity, session_id: str, state: bytes | None, link_name: str | None
    ) -> None:
        session = self._owned(entity, session_id, link_name)
        session.state = state
        session.updated_at = now_ms()
        self.store.session_state(entity.name, session_id, state)
        self.store.commit()

    def session_ids(self, entity: Entity) -> list[str]:
        """Sessions with active messages or with state, oldest first."""
        found = dict.fromkeys(
            m.session_id
            for m in entity.messages.values()
            if m.session_id is not None and m.state == ACTIVE
        )
        found.update(dict.fromkeys(s.id for s in entity.sessions.values() if s.state is not None))
        return [sid for sid in found if sid is not None]

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
            self._owned(entity, session_id, link_name)
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
            token = self._lock_message(entity, message, owner, locked_until)
            result.append((message, token, locked_until))
        self.store.commit()
        return result

    # ------------------------------------------------------------------ settlement

    def message_for(
        self, token: uuid.UUID, session_id: str | None = None
    ) -> tuple[Entity, Message]:
        found = self.locks.get(token)
        if found is None or found[1].locked_until < now_ms():
            if session_id is not None:
                raise SessionLockLost(
                    f"The session lock has expired on the session '{session_id}'. "
                    "Accept a new session."
                )
            raise MessageLockLost(
                "The lock supplied is invalid. Either the lock expired, or the message has "
                "already been removed from the queue."
            )
        return found

    def complete(self, token: uuid.UUID, session_id: str | None = None) -> None:
        entity, message = self.message_for(token, session_id)
        self._remove(entity, message)
        self.store.commit()

    def release(self, token: uuid.UUID) -> None:
        """Unlock without counting a delivery (a receiver gave back a prefetched message)."""
        found = self.locks.get(token)
        if found is not None:
            self._unlock(*found, count=False)
            self.store.commit()

    def abandon(self, token: uuid.UUID, session_id: str | None = None) -> None:
        entity, message = self.message_for(token, session_id)
        self._unlock(entity, message, count=True)
        self.store.commit()

    def defer(self, token: uuid.UUID, session_id: str | None = None) -> None:
        entity, message = self.message_for(token, session_id)
        self._drop_lock(entity, message)
        message.state = DEFERRED
        self.store.put(entity.store_key, message)
        self.store.commit()

    def dead_letter(
        self,
        token: uuid.UUID,
        reason: str | None,
        description: str | None,
        session_id: str | None = None,
    ) -> None:
        entity, message = self.message_for(token, session_id)
        self._drop_lock(entity, message)
        self._dead_letter(entity, message, reason, description)
        self.store.commit()

    def renew_lock(self, token: uuid.UUID) -> int:
        entity, message = self.message_for(token)
        message.locked_until = now_ms() + entity.config.lock_duration_ms
        self._timer(message.locked_until, "lock", entity, message.sequence_number)
        return message.locked_until

    # ------------------------------------------------------------------ timers

    def next_due(self) -> int | None:
        return self._timers[0][0] if self._timers else None

    def tick(self) -> None:
        """Run every timer that is due: lock and session-lock expiry, scheduled messages, TTL."""
        now = now_ms()
        while self._timers and self._timers[0][0] <= now:
            _, _, kind, entity, sequence, session_id = heapq.heappop(self._timers)
            if kind == "session":
                self._expire_session(entity, session_id, now)
                continue
            message = entity.messages.get(sequence)
            if message is None:
                continue
            if kind == "lock" and message.lock_token is not None and message.locked_until <= now:
                if message.session_id is None or not entity.requires_session:
                    self._unlock(entity, message, count=True)
            elif kind == "due" and message.state == SCHEDULED:
                message.state = ACTIVE
                self.store.put(entity.store_key, message)
                self._make_available(entity, message)
            elif kind == "ttl" and message.expires_at is not None and message.expires_at <= now:
                if message.lock_token is not None:  # expires once its lock ends
                    self._timer(message.locked_until + 1, "ttl", entity, sequence)
                    continue
                self._expire(entity, message)
        self.store.commit()

    # ------------------------------------------------------------------ counts

    def counts(self) -> dict[str, dict[str, int]]:
        result = {}
        for queue in self.entities.values():
            states = [m.state for m in queue.messages.values()]
            assert queue.dead_letter is not None
            result[queue.name] = {
                "active": states.count(ACTIVE),
                "scheduled": states.count(SCHEDULED),
                "deferred": states.count(DEFERRED),
                "dead_lettered": len(queue.dead_letter.messages),
                "locked": sum(1 for m in queue.messages.values() if m.lock_token is not None),
                "sessions": len(
                    {m.session_id for m in queue.messages.values() if m.session_id is not None}
                ),
            }
        return result

    # ------------------------------------------------------------------ internals

    def _timer(
        self, due: int, kind: str, entity: Entity, sequence: int, session_id: str = ""
    ) -> None:
        self._tiebreak += 1
        heapq.heappush(self._timers, (due, self._tiebreak, kind, entity, sequence, session_id))
        if self.wake is not None and (self.sleeping_until is None or due < self.sleeping_until):
            self.wake()

    def _available(self, message: Message) -> bool:
        return message.state == ACTIVE and message.lock_token is None

    def _pop(self, entity: Entity, heap: list[int]) -> Message | None:
        while heap:
            message = entity.messages.get(heap[0])
            heapq.heappop(heap)
            if message is not None and self._available(message):
                if message.expires_at is not None and message.expires_at <= now_ms():
                    self._expire(entity, message)
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
                self._offer_sessions(entity)
        else:
            heapq.heappush(entity.available, message.sequence_number)
            if entity.consumers:
                self.pump(entity)

    def _hand_over(
        self, entity: Entity, message: Message, consumer: Consumer, locked_until: int
    ) -> None:
        if consumer.receive_and_delete:
            self._remove(entity, message)
            consumer.deliver(message, None, 0)
            return
        token = self._lock_message(entity, message, consumer, locked_until)
        consumer.deliver(message, token, locked_until)

    def _lock_message(
        self, entity: Entity, message: Message, owner: Consumer | None, locked_until: int
    ) -> uuid.UUID:
        token = uuid.uuid4()
        message.lock_token = token
        message.locked_until = locked_until
        message.lock_owner = owner
        self.locks[token] = (entity, message)
        if entity.requires_session and message.session_id is not None:
            entity.session(message.session_id).locked.add(message.sequence_number)
        else:
            self._timer(locked_until, "lock", entity, message.sequence_number)
        return token

    def _drop_lock(self, entity: Entity, message: Message) -> None:
        if message.lock_token is not None:
            self.locks.pop(message.lock_token, None)
            if entity.requires_session and message.session_id is not None:
                session = entity.sessions.get(message.session_id)
                if session is not None:
                    session.locked.discard(message.sequence_number)
        message.lock_token = None
        message.lock_owner = None
        message.locked_until = 0

    def _unlock(self, entity: Entity, message: Message, *, count: bool) -> None:
        self._drop_lock(entity, message)
        if count:
            message.delivery_count += 1
            if (
                not entity.is_dead_letter
                and message.delivery_count >= entity.config.max_delivery_count
            ):
                self._dead_letter(
                    entity,
                    message,
                    "MaxDeliveryCountExceeded",
                    f"Message could not be consumed after {entity.config.max_delivery_count} "
                    "delivery attempts.",
                )
                return
            self.store.put(entity.store_key, message)
        if message.state == ACTIVE:
            self._make_available(entity, message)

    def _remove(self, entity: Entity, message: Message) -> None:
        self._drop_lock(entity, message)
        entity.messages.pop(message.sequence_number, None)
        self.store.delete(entity.store_key, message.sequence_number)

    def _dead_letter(
        self, entity: Entity, message: Message, reason: str | None, description: str | None
    ) -> None:
        target = entity.queue.dead_letter
        assert target is not None
        entity.messages.pop(message.sequence_number, None)
        message.dead_letter_properties(reason, description)
        if self._forward_dead_letter(entity, message):
            return
        message.dead_lettered = True
        message.state = ACTIVE
        message.expires_at = None  # dead letters never expire
        target.messages[message.sequence_number] = message
        self.store.put(entity.store_key, message)
        self._make_available(target, message)

    def _forward_dead_letter(self, entity: Entity, message: Message) -> bool:
        """ForwardDeadLetteredMessagesTo: the dead letter goes to another queue instead."""
        name = entity.queue.config.forward_dead_lettered_to
        target = self.entities.get(name.lower()) if name else None
        if target is None or entity.is_dead_letter or target is entity.queue:
            return False
        incoming = Incoming(
            message_id=message.message_id,
            session_id=message.session_id,
            ttl_ms=message.ttl_ms,
            scheduled_at=None,
            header=message.header,
            annotations=message.annotations,
            properties=message.properties,
            application_properties=message.application_properties,
            body=message.body,
        )
        try:
            self.send(target, incoming, message.size)
        except BrokerError as failure:
            log.warning("cannot forward a dead letter to %r: %s", name, failure.description)
            return False
        self.store.delete(entity.store_key, message.sequence_number)
        return True

    def _expire(self, entity: Entity, message: Message) -> None:
        if entity.config.dead_lettering_on_expiration and not entity.is_dead_letter:
            self._dead_letter(
                entity,
                message,
                "TTLExpiredException",
                "The message expired and was dead lettered.",
            )
        else:
            self._remove(entity, message)

    def _free_session(self, entity: Entity) -> Session | None:
        best: tuple[int, Session] | None = None
        for session in entity.sessions.values():
            if session.owner is not None:
                continue
            heap = session.available
            while heap:
                head = entity.messages.get(heap[0])
                if head is not None and self._available(head):
                    break
                heapq.heappop(heap)
            if heap and (best is None or heap[0] < best[0]):
                best = (heap[0], session)
        return best[1] if best else None

    def _offer_sessions(self, entity: Entity) -> None:
        while entity.waiters:
            session = self._free_session(entity)
            if session is None:
                return
            consumer, on_locked = entity.waiters.popleft()
            self._lock(entity, session, consumer)
            on_locked(session)

    def _lock(self, entity: Entity, session: Session, consumer: Consumer) -> None:
        session.owner = consumer
        session.locked_until = now_ms() + entity.config.lock_duration_ms
        consumer.session_id = session.id
        self._timer(session.locked_until, "session", entity, 0, session.id)

    def _release_session(self, entity: Entity, session: Session) -> None:
        session.owner = None
        session.locked_until = 0
        for sequence in sorted(session.locked):
            self._unlock(entity, entity.messages[sequence], count=True)
        if not session.available and session.state is None:
            entity.sessions.pop(session.id, None)
        if entity.waiters:
            self._offer_sessions(entity)

    def _expire_session(self, entity: Entity, session_id: str, now: int) -> None:
        session = entity.sessions.get(session_id)
        if session is None or session.owner is None or session.locked_until > now:
            return
        owner = session.owner
        self._release_session(entity, session)
        owner.session_lost(
            f"The session lock has expired on the session '{session_id}'. Accept a new session."
        )

    def _owned(self, entity: Entity, session_id: str, link_name: str | None) -> Session:
        session = entity.sessions.get(session_id)
        if (
            session is None
            or session.owner is None
            or session.locked_until < now_ms()
            or (link_name is not None and session.owner.name != link_name)
        ):
            raise SessionLockLost(
                f"The session lock has expired on the session '{session_id}', or the session "
                "is not locked by this receiver. Accept the session again."
            )
        return session

    def _load(self, store: SqliteStore) -> None:
        self._sequence.update(
            {name: last for name, last in store.sequences().items() if name in self._sequence}
        )
        now = now_ms()
        for name, message_id, expires_at in store.duplicates():
            if name in self._duplicates and expires_at > now:
                self._duplicates[name][message_id] = expires_at
        for name, message in store.messages():
            queue = self.entities.get(name.lower())
            if queue is None:
                log.warning("dropping stored messages of %r: not in the config any more", name)
                continue
            entity = queue.dead_letter if message.dead_lettered else queue
            assert entity is not None
            entity.messages[message.sequence_number] = message
            if message.state == SCHEDULED and message.scheduled_at:
                self._timer(message.scheduled_at, "due", entity, message.sequence_number)
            elif message.state == ACTIVE:
                if entity.requires_session and message.session_id is not None:
                    heapq.heappush(
                        entity.session(message.session_id).available, message.sequence_number
                    )
                else:
                    heapq.heappush(entity.available, message.sequence_number)
            if message.expires_at is not None:
                self._timer(message.expires_at, "ttl", entity, message.sequence_number)
        for name, session_id, state in store.session_states():
            queue = self.entities.get(name.lower())
            if queue is not None:
                queue.session(session_id).state = state
