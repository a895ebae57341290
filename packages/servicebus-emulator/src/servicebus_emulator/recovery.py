"""Start from what the store kept (``--data-dir``): messages in their states, session states,
the last sequence number and the duplicate-detection history of every entity.

A restart ends every lock. A message that was delivered under a lock (its own or its session's)
when the process ended comes back as after that lock's expiry: its delivery counts, so it is
redelivered with delivery count + 1, or dead-lettered ``MaxDeliveryCountExceeded`` when that
reaches MaxDeliveryCount.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable

from .clock import now_ms
from .entities import Entities, Entity
from .message import ACTIVE, SCHEDULED, Message
from .routing import Router
from .store import SqliteStore
from .timers import Timers

log = logging.getLogger(__name__)


def restore(
    store: SqliteStore,
    entities: Entities,
    router: Router,
    timers: Timers,
    redeliver: Callable[[Entity, Message], None],
) -> None:
    """Put what ``store`` kept back into ``entities`` (which already hold the config file's and
    the management API's entities), ``router`` (sequence numbers, duplicate detection) and
    ``timers``; a message a lock held when the process ended goes to ``redeliver``."""
    router.sequences.update(
        {name: last for name, last in store.sequences().items() if entities.get(name)}
    )
    now = now_ms()
    for name, message_id, expires_at in store.duplicates():
        if expires_at > now and entities.get(name):
            router.duplicates.setdefault(name, {})[message_id] = expires_at
    interrupted: list[tuple[Entity, Message]] = []
    for name, message, locked in store.messages():
        queue = entities.get(name)
        if queue is None:
            log.warning("dropping stored messages of %r: it does not exist any more", name)
            continue
        entity = queue.dead_letter if message.dead_lettered and queue.dead_letter else queue
        assert entity is not None
        entity.messages[message.sequence_number] = message
        if locked:
            interrupted.append((entity, message))
        elif message.state == SCHEDULED and message.scheduled_at:
            timers.add(message.scheduled_at, "due", entity, message.sequence_number)
        elif message.state == ACTIVE:
            if entity.requires_session and message.session_id is not None:
                heapq.heappush(
                    entity.session(message.session_id).available, message.sequence_number
                )
            else:
                heapq.heappush(entity.available, message.sequence_number)
        if message.expires_at is not None:
            timers.add(message.expires_at, "ttl", entity, message.sequence_number)
    for name, session_id, state in store.session_states():
        queue = entities.get(name)
        if queue is not None:
            queue.session(session_id).state = state
    for entity, message in interrupted:
        redeliver(entity, message)
    store.commit()
