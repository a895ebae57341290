"""Peek-lock message locks: the lock token a receiver settles with, and how long it holds.

A message of a plain entity has a lock of its own with a timer; a message received under a
session lock holds as long as its session's lock (the session's timer covers it). Locks live
in memory; the store records only that a message is locked, so that a restart counts the
delivery it interrupted (recovery.py), as a lock expiry would.
"""

from __future__ import annotations

import uuid

from .clock import now_ms
from .entities import Consumer, Entity
from .errors import MessageLockLost, SessionLockLost
from .message import Message
from .store import Store
from .timers import Timers


class MessageLocks:
    def __init__(self, timers: Timers, store: Store) -> None:
        self.timers = timers
        self.store = store
        self.tokens: dict[uuid.UUID, tuple[Entity, Message]] = {}

    def lock(
        self, entity: Entity, message: Message, owner: Consumer | None, locked_until: int
    ) -> uuid.UUID:
        token = uuid.uuid4()
        message.lock_token = token
        message.locked_until = locked_until
        message.lock_owner = owner
        self.tokens[token] = (entity, message)
        self.store.locked(entity.store_key, message.sequence_number, True)
        if entity.requires_session and message.session_id is not None:
            entity.session(message.session_id).locked.add(message.sequence_number)
        else:
            self.timers.add(locked_until, "lock", entity, message.sequence_number)
        return token

    def drop(self, entity: Entity, message: Message) -> None:
        """Forget the message's lock, if it has one (settled, released, expired). The caller
        stores what becomes of the message, which clears the stored lock."""
        if message.lock_token is not None:
            self.tokens.pop(message.lock_token, None)
            if entity.requires_session and message.session_id is not None:
                session = entity.sessions.get(message.session_id)
                if session is not None:
                    session.locked.discard(message.sequence_number)
        message.lock_token = None
        message.lock_owner = None
        message.locked_until = 0

    def held(self, token: uuid.UUID) -> tuple[Entity, Message] | None:
        """The message a token locks, even past its expiry (for a release)."""
        return self.tokens.get(token)

    def find(self, token: uuid.UUID, session_id: str | None = None) -> tuple[Entity, Message]:
        """The message a live lock holds; a lost lock is Service Bus's lock-lost error."""
        found = self.tokens.get(token)
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

    def renew(self, token: uuid.UUID) -> int:
        entity, message = self.find(token)
        message.locked_until = now_ms() + entity.config.lock_duration_ms
        self.timers.add(message.locked_until, "lock", entity, message.sequence_number)
        return message.locked_until
