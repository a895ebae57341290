"""The entities of a namespace, found by path: queues, topics and their subscriptions, each
queue and subscription with its dead-letter sub-queue.

An :class:`Entity` holds its messages and who is waiting for them; a :class:`Session` is one
session of a session-enabled entity. The rules for locks, timers and dead letters live in their
own modules; this one only knows what exists and where to find it.

Paths, case-insensitive: ``queue``, ``queue/$DeadLetterQueue``, ``topic``,
``topic/Subscriptions/sub``, ``topic/Subscriptions/sub/$DeadLetterQueue``.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from .clock import now_ms
from .config import NamespaceConfig, QueueConfig, SubscriptionConfig, TopicConfig
from .errors import EntityNotFound
from .message import ACTIVE, DEFERRED, SCHEDULED, Message
from .rules import Rule, RuleConfig, compile_rule

QUEUE, TOPIC, SUBSCRIPTION = "queue", "topic", "subscription"
DEAD_LETTER_QUEUE = "$DeadLetterQueue"


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

    def entity_deleted(self, description: str) -> None:
        """The entity it receives from was deleted: detach with amqp:not-found."""


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
    """A queue, a topic, a subscription, or the dead-letter sub-queue of a queue or a
    subscription (which never requires sessions). ``name`` is the entity's path."""

    name: str
    config: QueueConfig
    requires_session: bool
    kind: str = QUEUE
    is_dead_letter: bool = False
    messages: dict[int, Message] = field(default_factory=dict)  # a topic's: scheduled ones
    available: list[int] = field(default_factory=list)  # heap, non-session entities
    sessions: dict[str, Session] = field(default_factory=dict)
    consumers: list[Consumer] = field(default_factory=list)  # non-session receivers
    waiters: deque[tuple[Consumer, Callable[[Session], None]]] = field(default_factory=deque)
    dead_letter: Entity | None = None
    parent: Entity | None = None  # a dead-letter sub-queue's entity
    topic: Entity | None = None  # a subscription's topic
    subscriptions: dict[str, Entity] = field(default_factory=dict)  # a topic's, by lower name
    rules: dict[str, Rule] = field(default_factory=dict)  # a subscription's, in order
    # what the management API reports: when, and the properties kept only to be echoed
    created_at: int = field(default_factory=now_ms)
    updated_at: int = field(default_factory=now_ms)
    extras: dict[str, str] = field(default_factory=dict)

    @property
    def queue(self) -> Entity:
        """The queue or subscription a dead-letter sub-queue belongs to; else the entity."""
        return self.parent or self

    @property
    def store_key(self) -> str:
        return self.queue.name

    @property
    def short_name(self) -> str:
        """The name within its parent: a subscription's own name, else the path."""
        return self.name.rsplit("/", 1)[-1] if self.kind == SUBSCRIPTION else self.name

    def session(self, session_id: str) -> Session:
        found = self.sessions.get(session_id)
        if found is None:
            found = self.sessions[session_id] = Session(session_id)
        return found


def _with_dead_letter(entity: Entity) -> Entity:
    entity.dead_letter = Entity(
        f"{entity.name}/{DEAD_LETTER_QUEUE}",
        entity.config,
        requires_session=False,
        kind=entity.kind,
        is_dead_letter=True,
        parent=entity,
    )
    return entity


class Entities:
    """Every queue and topic of the namespace by lower-case name (one namespace for both)."""

    def __init__(self, namespace: NamespaceConfig) -> None:
        self.queues: dict[str, Entity] = {}
        self.topics: dict[str, Entity] = {}
        for config in namespace.queues:
            self.add_queue(config)
        for topic in namespace.topics:
            self.add_topic(topic)

    def add_queue(self, config: QueueConfig) -> Entity:
        queue = _with_dead_letter(Entity(config.name, config, config.requires_session))
        self.queues[config.name.lower()] = queue
        return queue

    def add_topic(self, config: TopicConfig) -> Entity:
        topic = Entity(config.name, config.settings, requires_session=False, kind=TOPIC)
        self.topics[config.name.lower()] = topic
        for subscription in config.subscriptions:
            self.add_subscription(topic, subscription)
        return topic

    def add_subscription(self, topic: Entity, config: SubscriptionConfig) -> Entity:
        settings = config.settings
        subscription = _with_dead_letter(
            Entity(
                f"{topic.name}/Subscriptions/{settings.name}",
                settings,
                settings.requires_session,
                kind=SUBSCRIPTION,
                topic=topic,
            )
        )
        for rule in config.rules:
            self.set_rule(subscription, rule)
        topic.subscriptions[settings.name.lower()] = subscription
        return subscription

    def set_rule(self, subscription: Entity, config: RuleConfig) -> None:
        """Add or replace a rule (compiled now: sql_filter.SqlFilterError if it is refused)."""
        subscription.rules[config.name] = compile_rule(config)

    def get(self, name: str) -> Entity | None:
        """A queue or a topic by name, or any entity by its path."""
        found = self.queues.get(name.lower()) or self.topics.get(name.lower())
        if found is None and "/" in name:
            try:
                return self.entity(name)
            except EntityNotFound:
                return None
        return found

    def entity(self, path: str) -> Entity:
        parts = [part for part in path.strip("/").split("/") if part]
        if not parts:
            raise EntityNotFound("No entity path was given.")
        head = parts[0].lower()
        found = self.queues.get(head) or self.topics.get(head)
        if found is None:
            raise EntityNotFound(
                f"The messaging entity '{parts[0]}' could not be found. "
                "Add it to the emulator's config file, or create it with the administration API."
            )
        rest = [part.lower() for part in parts[1:]]
        if found.kind == TOPIC and len(rest) >= 2 and rest[0] == "subscriptions":
            subscription = found.subscriptions.get(rest[1])
            if subscription is None:
                raise EntityNotFound(
                    f"The messaging entity '{parts[0]}/Subscriptions/{parts[2]}' could not be "
                    "found."
                )
            found, rest = subscription, rest[2:]
        if not rest:
            return found
        if found.dead_letter is not None and rest in (
            ["$deadletterqueue"],
            ["$transfer", "$deadletterqueue"],
        ):
            return found.dead_letter
        raise EntityNotFound(f"The messaging entity '{path}' could not be found.")

    def receivable(self) -> list[Entity]:
        """Queues and subscriptions: what holds messages for receivers."""
        found = list(self.queues.values())
        for topic in self.topics.values():
            found += topic.subscriptions.values()
        return found

    def counts(self) -> dict[str, dict[str, int]]:
        """Per queue and subscription (by path): active, scheduled, deferred, dead-lettered,
        locked, sessions; per topic: its scheduled messages."""
        result = {}
        for entity in self.receivable():
            states = [m.state for m in entity.messages.values()]
            assert entity.dead_letter is not None
            result[entity.name] = {
                "active": states.count(ACTIVE),
                "scheduled": states.count(SCHEDULED),
                "deferred": states.count(DEFERRED),
                "dead_lettered": len(entity.dead_letter.messages),
                "locked": sum(1 for m in entity.messages.values() if m.lock_token is not None),
                "sessions": len(
                    {m.session_id for m in entity.messages.values() if m.session_id is not None}
                ),
            }
        for topic in self.topics.values():
            result[topic.name] = {"scheduled": len(topic.messages)}
        return result
