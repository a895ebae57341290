"""Session locks: one receiver per session, named or next-available, and the session's state.

A receiver asks for a named session (refused while another holds it) or for the next session
with an available message (it waits when there is none, and gets the next one that shows up).
A session lock ends when its receiver detaches or its lock expires; the messages delivered under
it then come back as after a lock expiry (``redeliver``).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable

from .clock import now_ms
from .entities import Consumer, Entity, Session
from .errors import NotAllowed, SessionCannotBeLocked, SessionLockLost
from .message import ACTIVE, Message
from .store import Store
from .timers import Timers


def deliverable(message: Message) -> bool:
    return message.state == ACTIVE and message.lock_token is None


class SessionLocks:
    def __init__(
        self, timers: Timers, store: Store, redeliver: Callable[[Entity, Message], None]
    ) -> None:
        self.timers = timers
        self.store = store
        self.redeliver = redeliver

    def lock(
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
                self.release(entity, session)
            self._grant(entity, session, consumer)
            return session
        free = self._free_session(entity)
        if free is not None:
            self._grant(entity, free, consumer)
            return free
        entity.waiters.append((consumer, on_locked))
        return None

    def stop_waiting(self, entity: Entity, consumer: Consumer) -> None:
        entity.waiters = deque(w for w in entity.waiters if w[0] is not consumer)

    def detach(self, entity: Entity, consumer: Consumer) -> None:
        """The receiver went away: it stops waiting, and its session lock ends."""
        self.stop_waiting(entity, consumer)
        sid = consumer.session_id
        if sid is not None:
            session = entity.sessions.get(sid)
            if session is not None and session.owner is consumer:
                self.release(entity, session)

    def renew(self, entity: Entity, session_id: str, link_name: str | None) -> int:
        session = self.owned(entity, session_id, link_name)
        session.locked_until = now_ms() + entity.config.lock_duration_ms
        for sequence in session.locked:
            entity.messages[sequence].locked_until = session.locked_until
        self.timers.add(session.locked_until, "session", entity, 0, session_id)
        return session.locked_until

    def state(self, entity: Entity, session_id: str, link_name: str | None) -> bytes | None:
        return self.owned(entity, session_id, link_name).state

    def set_state(
        self, entity: Entity, session_id: str, state: bytes | None, link_name: str | None
    ) -> None:
        session = self.owned(entity, session_id, link_name)
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

    def owned(self, entity: Entity, session_id: str, link_name: str | None) -> Session:
        """The session, if its lock is live and (given a link name) held by that link."""
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

    def offer(self, entity: Entity) -> None:
        """Hand sessions that have messages to receivers waiting for the next one."""
        while entity.waiters:
            session = self._free_session(entity)
            if session is None:
                return
            consumer, on_locked = entity.waiters.popleft()
            self._grant(entity, session, consumer)
            on_locked(session)

    def release(self, entity: Entity, session: Session) -> None:
        session.owner = None
        session.locked_until = 0
        for sequence in sorted(session.locked):
            self.redeliver(entity, entity.messages[sequence])
        if not session.available and session.state is None:
            entity.sessions.pop(session.id, None)
        if entity.waiters:
            self.offer(entity)

    def expire(self, entity: Entity, session_id: str, now: int) -> None:
        """A session timer fired: end the lock if it was not renewed meanwhile."""
        session = entity.sessions.get(session_id)
        if session is None or session.owner is None or session.locked_until > now:
            return
        owner = session.owner
        self.release(entity, session)
        owner.session_lost(
            f"The session lock has expired on the session '{session_id}'. Accept a new session."
        )

    def _grant(self, entity: Entity, session: Session, consumer: Consumer) -> None:
        session.owner = consumer
        session.locked_until = now_ms() + entity.config.lock_duration_ms
        consumer.session_id = session.id
        self.timers.add(session.locked_until, "session", entity, 0, session.id)

    def _free_session(self, entity: Entity) -> Session | None:
        best: tuple[int, Session] | None = None
        for session in entity.sessions.values():
            if session.owner is not None:
                continue
            heap = session.available
            while heap:
                head = entity.messages.get(heap[0])
                if head is not None and deliverable(head):
                    break
                heapq.heappop(heap)
            if heap and (best is None or heap[0] < best[0]):
                best = (heap[0], session)
        return best[1] if best else None
