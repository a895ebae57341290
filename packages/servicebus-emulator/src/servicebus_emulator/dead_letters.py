"""Dead-lettering: a message moves to its entity's ``$DeadLetterQueue`` with a reason, or to the
queue named by ``ForwardDeadLetteredMessagesTo``; an expired message is dead-lettered when its
entity says so (``DeadLetteringOnMessageExpiration``), else dropped."""

from __future__ import annotations

import logging
from collections.abc import Callable

from .entities import Entities, Entity
from .errors import BrokerError
from .message import ACTIVE, Incoming, Message
from .store import Store

log = logging.getLogger(__name__)

MAX_DELIVERY_REASON = "MaxDeliveryCountExceeded"
TTL_EXPIRED_REASON = "TTLExpiredException"


class DeadLetters:
    def __init__(
        self,
        entities: Entities,
        store: Store,
        *,
        send: Callable[[Entity, Incoming, int], int | None],
        make_available: Callable[[Entity, Message], None],
        remove: Callable[[Entity, Message], None],
    ) -> None:
        self.entities = entities
        self.store = store
        self.send = send
        self.make_available = make_available
        self.remove = remove

    def move(
        self, entity: Entity, message: Message, reason: str | None, description: str | None
    ) -> None:
        """Into the dead-letter sub-queue (or forwarded); the message must hold no lock."""
        target = entity.queue.dead_letter
        assert target is not None
        entity.messages.pop(message.sequence_number, None)
        given = {"DeadLetterReason": reason, "DeadLetterErrorDescription": description}
        message.set_properties(
            {key: value for key, value in given.items() if value is not None},
            removed=[key for key, value in given.items() if value is None],
        )
        if self._forward(entity, message):
            return
        message.dead_lettered = True
        message.state = ACTIVE
        message.expires_at = None  # dead letters never expire
        target.messages[message.sequence_number] = message
        self.store.put(entity.store_key, message)
        self.make_available(target, message)

    def max_delivery_count_exceeded(self, entity: Entity, message: Message) -> bool:
        """Dead-letter a message whose delivery count reached MaxDeliveryCount; True if so."""
        limit = entity.config.max_delivery_count
        if entity.is_dead_letter or message.delivery_count < limit:
            return False
        self.move(
            entity,
            message,
            MAX_DELIVERY_REASON,
            f"Message could not be consumed after {limit} delivery attempts.",
        )
        return True

    def expire(self, entity: Entity, message: Message) -> None:
        if entity.config.dead_lettering_on_expiration and not entity.is_dead_letter:
            self.move(
                entity, message, TTL_EXPIRED_REASON, "The message expired and was dead lettered."
            )
        else:
            self.remove(entity, message)

    def _forward(self, entity: Entity, message: Message) -> bool:
        """ForwardDeadLetteredMessagesTo: the dead letter goes to another queue instead."""
        name = entity.queue.config.forward_dead_lettered_to
        target = self.entities.get(name) if name else None
        if target is None or entity.is_dead_letter or target is entity.queue:
            return False
        incoming = message.as_incoming()
        incoming.scheduled_at = None
        try:
            self.send(target, incoming, message.size)
        except BrokerError as failure:
            log.warning("cannot forward a dead letter to %r: %s", name, failure.description)
            return False
        self.store.delete(entity.store_key, message.sequence_number)
        return True
