"""The links of an AMQP session, as the emulator keeps them: inbound (the client sends messages
or requests on it) and outbound (the emulator sends messages or replies on it)."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .entities import Entity
from .framing import error
from .message import Message

if TYPE_CHECKING:
    from .session import AmqpSession


@dataclass(eq=False)
class Link:
    name: str
    remote_handle: int
    handle: int
    session: AmqpSession
    kind: str  # "cbs" | "management" | "entity"
    address: str
    entity: Entity | None = None


@dataclass(eq=False)
class InboundLink(Link):
    """The client sends on it: messages to an entity, or CBS / management requests."""

    delivery_id: int | None = None
    tag: bytes = b""
    settled: bool = False
    message_format: int = 0
    payload: bytearray = field(default_factory=bytearray)
    received: int = 0


@dataclass(eq=False)
class OutboundLink(Link):
    """The server sends on it: received messages, or CBS / management replies. A Consumer."""

    receive_and_delete: bool = False
    session_id: str | None = None
    wants_session: bool = False
    delivery_count: int = 0
    link_credit: int = 0
    attached: bool = False
    source: Any = None
    target: Any = None
    on_timeout: asyncio.TimerHandle | None = None

    @property
    def credit(self) -> int:
        return self.link_credit if self.attached else 0

    def deliver(self, message: Message, lock_token: uuid.UUID | None, locked_until: int) -> None:
        self.session.deliver(self, message, lock_token, locked_until)

    def session_lost(self, description: str) -> None:
        self.session.detach_link(self, error("com.microsoft:session-lock-lost", description))

    def entity_deleted(self, description: str) -> None:
        self.session.detach_link(self, error("amqp:not-found", description))
