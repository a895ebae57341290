"""The links of an AMQP session, as the emulator keeps them: inbound (the client sends messages
or requests on it) and outbound (the emulator sends messages or replies on it). A link reaches
its session only through :class:`Sender`: what it sends there."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from .codec import Described
from .entities import Entity
from .framing import error
from .message import Message


class Sender(Protocol):
    """The AMQP session a link is on, as the link uses it: the frames it sends for the link."""

    def deliver(
        self, link: OutboundLink, message: Message, lock_token: uuid.UUID | None, locked_until: int
    ) -> None:
        """Transfer ``message`` on ``link`` (unsettled under ``lock_token``, if any)."""

    def detach_link(self, link: Link, failure: Described | None) -> None:
        """Detach ``link`` from the server's side, with ``failure`` as its error."""


@dataclass(eq=False)
class Link:
    name: str
    remote_handle: int
    handle: int
    session: Sender
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
