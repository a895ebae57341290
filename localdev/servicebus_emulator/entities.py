"""The entities of a namespace: queues and their dead-letter sub-queues, found by path.

An :class:`Entity` holds its messages and who is waiting for them; a :class:`Session` is one
session of a session-enabled entity. The rules for locks, timers and dead letters live in their
own modules; this one only knows what exists and where to find it.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from .config import QueueConfig
from .errors import EntityNotFound
from .message import ACTIVE, DEFERRED, SCHEDULED, Message


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


class Entities:
    """Every queue of the namespace by lower-case name, each with its dead-letter sub-queue."""

    def __init__(self, queues: Iterable[QueueConfig]) -> None:
        self.queues: dict[str, Entity] = {}
        for config in queues:
            queue = Entity(config.name, config, requires_session=config.requires_session)
            queue.dead_letter = Entity(
                f"{config.name}/$DeadLetterQueue",
                config,
                requires_session=False,
                is_dead_letter=True,
                parent=queue,
            )
            self.queues[config.name.lower()] = queue

    def get(self, name: str) -> Entity | None:
        return self.queues.get(name.lower())

    def entity(self, path: str) -> Entity:
        """``queue``, ``queue/$DeadLetterQueue`` (case-insensitive)."""
        parts = [part for part in path.strip("/").split("/") if part]
        if not parts:
            raise EntityNotFound("No entity path was given.")
        queue = self.queues.get(parts[0].lower())
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

    def counts(self) -> dict[str, dict[str, int]]:
        """Per queue: active, scheduled, deferred, dead-lettered, locked, sessions."""
        result = {}
        for queue in self.queues.values():
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
