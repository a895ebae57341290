"""The way into the namespace: what happens to a message sent to a queue or a topic before it is
stored. Size and target checks, duplicate detection, a message id when the sender set none,
``ForwardTo`` (to another queue or topic, at most four hops, as Service Bus allows), and a
topic's fan-out: each subscription gets the copies its rules select (rules.py), or none. A
message scheduled on a topic waits in the topic and fans out when it is due.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable

from .clock import now_ms
from .dead_letters import DeadLetters
from .entities import SUBSCRIPTION, TOPIC, Entities, Entity
from .errors import BrokerError, EntityNotFound, MessageTooLarge, NotAllowed
from .message import SCHEDULED, Incoming, Message
from .rules import FilterEvaluationFailed, copies
from .store import Store
from .timers import Timers

log = logging.getLogger(__name__)

MAX_MESSAGE_SIZE = 1024 * 1024
MAX_FORWARDING_HOPS = 4

# Store one message in a queue or a subscription: (entity, message, size, the default TTL of
# the topic it came through, whether receivers may have it) -> the stored message.
Enqueue = Callable[[Entity, Incoming, int, int | None, bool], Message]


class Router:
    def __init__(
        self,
        entities: Entities,
        store: Store,
        timers: Timers,
        dead_letters: DeadLetters,
        enqueue: Enqueue,
    ) -> None:
        self.entities = entities
        self.store = store
        self.timers = timers
        self.dead_letters = dead_letters
        self.enqueue = enqueue
        self.sequences: dict[str, int] = {}  # last sequence number, by entity path
        self.duplicates: dict[str, dict[str, int]] = {}  # message id -> window end, by entity

    def next_sequence(self, entity: Entity) -> int:
        sequence = self.sequences.get(entity.name, 0) + 1
        self.sequences[entity.name] = sequence
        self.store.sequence(entity.name, sequence)
        return sequence

    def send(self, entity: Entity, incoming: Incoming, size: int, *, hops: int = 0) -> int | None:
        """Accept one message for a queue or a topic: its sequence number there (a topic's for
        a topic), or None when duplicate detection dropped it."""
        if size > MAX_MESSAGE_SIZE:
            raise MessageTooLarge(
                f"The received message (size {size} bytes) exceeds the limit "
                f"({MAX_MESSAGE_SIZE} bytes) currently allowed on the link."
            )
        if entity.is_dead_letter:
            raise NotAllowed("Messages cannot be sent to a dead-letter sub-queue.")
        if entity.kind == SUBSCRIPTION:
            raise NotAllowed(
                f"Messages cannot be sent to the subscription '{entity.name}': send them to "
                "its topic."
            )
        now = now_ms()
        if entity.requires_session and not incoming.session_id:
            raise BrokerError(
                f"The SessionId was not set on a message, and it cannot be sent to the entity "
                f"'{entity.name}'. Entities that have session support enabled can only "
                "receive messages that have a non-empty SessionId."
            )
        if (
            entity.config.requires_duplicate_detection
            and incoming.message_id is not None
            and self._seen(entity, incoming.message_id, now)
        ):
            return None
        if incoming.message_id is None:  # Service Bus assigns one (SDKs renew locks by it)
            incoming.assign_message_id(uuid.uuid4().hex)
        target = self._forward_target(entity, hops)
        if target is not None:
            return self.send(target, incoming, size, hops=hops + 1)
        if entity.kind != TOPIC:
            return self.enqueue(entity, incoming, size, None, True).sequence_number
        sequence = self.next_sequence(entity)
        if (incoming.scheduled_at or 0) > now:
            self._hold(entity, incoming, sequence)
        else:
            self.fan_out(entity, incoming, size, sequence, now)
        return sequence

    def fan_out(
        self, topic: Entity, incoming: Incoming, size: int, sequence: int, enqueued_at: int
    ) -> None:
        """Each subscription gets the copies its rules select. A copy a subscription cannot
        take (no session id for a session subscription, a rule that failed on it) goes to
        that subscription's dead-letter sub-queue, with a reason that says why."""
        for subscription in list(topic.subscriptions.values()):
            try:
                selected = copies(
                    list(subscription.rules.values()),
                    incoming,
                    sequence_number=sequence,
                    enqueued_at=enqueued_at,
                    size=size,
                )
            except FilterEvaluationFailed as failure:
                if subscription.config.dead_lettering_on_filter_evaluation_exceptions:
                    self._refuse(subscription, incoming, size, topic, "FilterEvaluationFailed",
                                 str(failure))  # fmt: skip
                else:
                    log.info("dropped for %s: %s", subscription.name, failure)
                continue
            for copy in selected:
                self._deliver(subscription, dataclasses.replace(copy), size, topic)

    def _deliver(self, subscription: Entity, copy: Incoming, size: int, topic: Entity) -> None:
        target = self._forward_target(subscription, 0)
        if target is not None:
            try:
                self.send(target, copy, size, hops=1)
            except BrokerError as failure:
                self._refuse(subscription, copy, size, topic, "ForwardingFailed",
                             failure.description)  # fmt: skip
            return
        if subscription.requires_session and not copy.session_id:
            self._refuse(
                subscription, copy, size, topic, "SessionIdIsMissing",
                f"The subscription '{subscription.name}' requires sessions and the message "
                "has no SessionId.",
            )  # fmt: skip
            return
        self.enqueue(subscription, copy, size, topic.config.default_ttl_ms, True)

    def _refuse(
        self,
        subscription: Entity,
        copy: Incoming,
        size: int,
        topic: Entity,
        reason: str,
        description: str,
    ) -> None:
        message = self.enqueue(subscription, copy, size, topic.config.default_ttl_ms, False)
        self.dead_letters.move(subscription, message, reason, description)

    def due(self, topic: Entity, message: Message) -> None:
        """A message scheduled on a topic is due: it leaves the topic for the subscriptions."""
        del topic.messages[message.sequence_number]
        self.store.delete(topic.store_key, message.sequence_number)
        self.fan_out(topic, message.as_incoming(), message.size, message.sequence_number, now_ms())

    def _hold(self, topic: Entity, incoming: Incoming, sequence: int) -> None:
        assert incoming.scheduled_at is not None
        message = incoming.stored(sequence, incoming.scheduled_at, None, SCHEDULED)
        topic.messages[sequence] = message
        self.store.put(topic.store_key, message)
        self.timers.add(incoming.scheduled_at, "due", topic, sequence)

    def _forward_target(self, entity: Entity, hops: int) -> Entity | None:
        name = entity.config.forward_to
        if not name or entity.kind == TOPIC:
            return None
        target = self.entities.get(name)
        if target is None:
            raise EntityNotFound(f"'{entity.name}' forwards to '{name}', which does not exist.")
        if hops >= MAX_FORWARDING_HOPS:
            raise BrokerError(
                f"The message was forwarded {hops} times; Service Bus forwards at most "
                f"{MAX_FORWARDING_HOPS} times (ForwardTo of '{entity.name}')."
            )
        return target

    def _seen(self, entity: Entity, message_id: str, now: int) -> bool:
        """Duplicate detection: True when this id came within the window (and is dropped)."""
        seen = self.duplicates.setdefault(entity.name, {})
        expires = seen.get(message_id)
        if expires is not None and expires > now:
            return True
        expires_at = now + entity.config.duplicate_detection_window_ms
        seen[message_id] = expires_at
        self.store.duplicate(entity.name, message_id, expires_at)
        if len(seen) > 10_000 and len(seen) % 1000 == 0:
            for key in [key for key, when in seen.items() if when <= now]:
                del seen[key]
        return False
