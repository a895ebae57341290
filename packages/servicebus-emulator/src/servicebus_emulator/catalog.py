"""The namespace as the management API changes it at run time: create, update and delete of
queues, topics, subscriptions and rules, each recorded in the store as the client described it,
and replayed from there at start (after the config file), so the changes survive a restart.

A deleted entity takes its messages with it; receivers attached to it are detached with
``amqp:not-found``, as Service Bus does.
"""

from __future__ import annotations

import dataclasses

from .clock import now_ms
from .config import ConfigError, SubscriptionConfig, TopicConfig, queue_config
from .descriptions import Description, read_entity, read_rule
from .entities import QUEUE, SUBSCRIPTION, TOPIC, Entities, Entity
from .message_locks import MessageLocks
from .rules import DEFAULT, DEFAULT_RULE, RuleConfig
from .sql_filter import SqlFilterError
from .store import Store

RULE = "rule"


class ManagementError(Exception):
    """A request the management API refuses: its HTTP status and what to fix."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def _missing(path: str) -> ManagementError:
    return ManagementError(404, f"The messaging entity '{path}' could not be found.")


class Catalog:
    def __init__(self, entities: Entities, locks: MessageLocks, store: Store) -> None:
        self.entities = entities
        self.locks = locks  # a deleted entity's locked messages let go of their locks
        self.store = store

    # ------------------------------------------------------------------ lookups

    def queue_or_topic(self, name: str) -> Entity | None:
        return self.entities.queues.get(name.lower()) or self.entities.topics.get(name.lower())

    def topic(self, name: str) -> Entity:
        found = self.entities.topics.get(name.lower())
        if found is None:
            raise _missing(name)
        return found

    def subscription(self, topic: str, name: str) -> Entity:
        found = self.topic(topic).subscriptions.get(name.lower())
        if found is None:
            raise _missing(f"{topic}/Subscriptions/{name}")
        return found

    # ------------------------------------------------------------------ changes

    def put(
        self, kind: str, path: list[str], body: bytes, *, update: bool, replay: bool = False
    ) -> Entity | RuleConfig:
        """Create (or with ``update``, change) the entity at ``path`` (queue or topic: [name];
        subscription: [topic, name]; rule: [topic, subscription, name]) from a request body."""
        try:
            if kind == RULE:
                result: Entity | RuleConfig = self._put_rule(path, read_rule(body), update)
            else:
                result = self._put_entity(kind, path, read_entity(body, kind), update)
        except (ConfigError, SqlFilterError, ValueError) as failure:
            raise ManagementError(400, str(failure)) from None
        if not replay:
            self.store.record(_key(kind, path), kind, body)
            self.store.commit()
        return result

    def delete(self, kind: str, path: list[str], *, replay: bool = False) -> None:
        if kind == RULE:
            subscription = self.subscription(path[0], path[1])
            if path[2] not in subscription.rules:
                raise _missing("/".join(path))
            del subscription.rules[path[2]]
        else:
            entity = self._existing(kind, path)
            self._drop(entity)
            if kind == SUBSCRIPTION:
                self.topic(path[0]).subscriptions.pop(path[1].lower())
            elif kind == TOPIC:
                self.entities.topics.pop(path[0].lower())
            else:
                self.entities.queues.pop(path[0].lower())
            self.store.forget(entity.name)
        if not replay:
            self.store.record(_key(kind, path), kind, None)
            self.store.commit()

    def replay(self) -> None:
        """Apply what the store recorded, in order, on top of the config file's entities."""
        for key, kind, body, replaces in self.store.records():
            path = _path(kind, key)
            exists = self._exists(kind, path)
            if exists and (body is None or replaces):
                self.delete(kind, path, replay=True)
            if body is not None:
                self.put(kind, path, body, update=exists and not replaces, replay=True)

    # ------------------------------------------------------------------ internals

    def _put_entity(
        self, kind: str, path: list[str], description: Description, update: bool
    ) -> Entity:
        name = path[-1]
        settings = queue_config(name, description.props)
        for target in (settings.forward_to, settings.forward_dead_lettered_to):
            if target and self.queue_or_topic(target) is None:
                raise ManagementError(400, f"The forwarding target '{target}' does not exist.")
        existing = self._find(kind, path)
        if update:
            if existing is None:
                raise _missing("/".join(path))
            if settings.requires_session != existing.config.requires_session:
                raise ManagementError(
                    400, "RequiresSession cannot be changed on an existing entity."
                )
            existing.config = settings
            existing.extras = description.extras
            existing.updated_at = now_ms()
            return existing
        if existing is not None or (kind != SUBSCRIPTION and self.queue_or_topic(name)):
            raise ManagementError(409, f"The messaging entity '{'/'.join(path)}' already exists.")
        if kind == QUEUE:
            entity = self.entities.add_queue(settings)
        elif kind == TOPIC:
            entity = self.entities.add_topic(TopicConfig(settings))
        else:
            rule = description.default_rule or DEFAULT
            if not rule.name:
                rule = dataclasses.replace(rule, name=DEFAULT_RULE)
            entity = self.entities.add_subscription(
                self.topic(path[0]), SubscriptionConfig(settings, (rule,))
            )
        entity.extras = description.extras
        return entity

    def _put_rule(self, path: list[str], rule: RuleConfig, update: bool) -> RuleConfig:
        subscription = self.subscription(path[0], path[1])
        name = path[2]
        if rule.name and rule.name != name:
            raise ManagementError(400, f"The rule's Name '{rule.name}' is not '{name}'.")
        rule = dataclasses.replace(rule, name=name)
        if update and name not in subscription.rules:
            raise _missing("/".join(path))
        if not update and name in subscription.rules:
            raise ManagementError(409, f"The rule '{'/'.join(path)}' already exists.")
        self.entities.set_rule(subscription, rule)
        return rule

    def _find(self, kind: str, path: list[str]) -> Entity | None:
        try:
            return self._existing(kind, path)
        except ManagementError:
            return None

    def _existing(self, kind: str, path: list[str]) -> Entity:
        if kind == SUBSCRIPTION:
            return self.subscription(path[0], path[1])
        found = (self.entities.queues if kind == QUEUE else self.entities.topics).get(
            path[0].lower()
        )
        if found is None:
            raise _missing(path[0])
        return found

    def _exists(self, kind: str, path: list[str]) -> bool:
        if kind == RULE:
            try:
                return path[2] in self.subscription(path[0], path[1]).rules
            except ManagementError:
                return False
        return self._find(kind, path) is not None

    def _drop(self, entity: Entity) -> None:
        """The entity and everything under it goes: locks, receivers, messages."""
        for sub in list(entity.subscriptions.values()):
            self._drop(sub)
        for held in (entity, entity.dead_letter):
            if held is None:
                continue
            for message in held.messages.values():
                self.locks.drop(held, message)
            receivers = [*held.consumers, *(w for w, _ in held.waiters)]
            receivers += [s.owner for s in held.sessions.values() if s.owner is not None]
            held.messages.clear()
            held.sessions.clear()
            held.waiters.clear()
            held.consumers.clear()
            for receiver in receivers:
                receiver.entity_deleted(f"The messaging entity '{held.name}' was deleted.")


def _key(kind: str, path: list[str]) -> str:
    if kind == SUBSCRIPTION:
        return f"{path[0]}/Subscriptions/{path[1]}"
    if kind == RULE:
        return f"{path[0]}/Subscriptions/{path[1]}/Rules/{path[2]}"
    return path[0]


def _path(kind: str, key: str) -> list[str]:
    parts = key.split("/")
    return (
        [parts[0], parts[2]]
        if kind == SUBSCRIPTION
        else ([parts[0], parts[2], parts[4]] if kind == RULE else [parts[0]])
    )
