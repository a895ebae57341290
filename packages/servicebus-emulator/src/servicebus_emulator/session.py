"""An AMQP session on a connection: its windows and flow, its links (attached in attach.py,
forgotten here), and the transfers it sends: messages to receivers and replies to requests.
What the client sends is handled in attach.py (attach, detach), inbound.py (transfers) and
settlement.py (dispositions), which connection.py hands each frame to.

The client enforces the session window the server grants (and ignores link credit): its sends
stall once the window is used up until a flow from the server opens it again. So the window is
re-granted well before it runs out.
"""

from __future__ import annotations

import logging
import struct
import uuid
from typing import TYPE_CHECKING, Any, Protocol

from .codec import Described, UInt, ULong, encode
from .framing import (
    DETACH,
    FLOW,
    LINK_CREDIT,
    SESSION_WINDOW,
    entity_path,
    frame,
    performative,
    transfer_performative,
)
from .links import InboundLink, Link, OutboundLink
from .message import Message

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)


class Transport(Protocol):
    """The AMQP connection a session is on, as the session uses it."""

    broker: Broker
    remote_max_frame: int  # the largest frame the client takes

    def write(self, data: bytes) -> None:
        """Queue bytes for the socket."""

    def flush(self) -> None:
        """Write what is queued now, the store committed first."""


class AmqpSession:
    def __init__(self, connection: Transport, channel: int, remote_channel: int) -> None:
        self.connection = connection
        self.channel = channel
        self.remote_channel = remote_channel
        self.next_incoming_id = 0
        self.window_base = 0  # next_incoming_id when we last granted a window
        self.next_outgoing_id = 0
        self.next_delivery_id = 0
        self.inbound: dict[int, InboundLink] = {}
        self.outbound: dict[int, OutboundLink] = {}  # by remote handle
        self.unsettled: dict[int, tuple[OutboundLink, uuid.UUID]] = {}
        self.handles: set[int] = set()

    @property
    def broker(self) -> Broker:
        return self.connection.broker

    def send(self, code: int, fields: list[Any], payload: bytes = b"") -> None:
        self.connection.write(frame(self.channel, performative(code, fields) + payload))

    def session_flow(self, link: Link | None = None, **link_fields: Any) -> None:
        self.window_base = self.next_incoming_id
        fields: list[Any] = [
            UInt(self.next_incoming_id),
            UInt(SESSION_WINDOW),
            UInt(self.next_outgoing_id),
            UInt(SESSION_WINDOW),
        ]
        if link is not None:
            fields += [
                UInt(link.handle),
                UInt(link_fields.get("delivery_count", 0)),
                UInt(link_fields.get("link_credit", 0)),
                None,
                link_fields.get("drain"),
            ]
        self.send(FLOW, fields)

    def receiver(self, name: str | None) -> OutboundLink | None:
        return next((link for link in self.outbound.values() if link.name == name), None)

    def new_handle(self) -> int:
        handle = 0
        while handle in self.handles:
            handle += 1
        self.handles.add(handle)
        return handle

    # -------------------------------------------------------------- what the client sends

    def on_flow(self, fields: list[Any]) -> None:
        handle = fields[4]
        if handle is None:
            if fields[9]:  # echo
                self.session_flow()
            return
        link = self.outbound.get(handle)
        if link is None:
            if handle in self.inbound and fields[9]:
                self.session_flow(self.inbound[handle], link_credit=LINK_CREDIT)
            return
        delivery_count = fields[5] if isinstance(fields[5], int) else link.delivery_count
        credit = fields[6] if isinstance(fields[6], int) else 0
        link.link_credit = max(0, delivery_count + credit - link.delivery_count)
        if link.entity is not None and link.attached:
            self.broker.pump(link.entity, link.session_id)
        if fields[8] and link.link_credit:  # drain: use up the credit, tell the client
            link.delivery_count += link.link_credit
            link.link_credit = 0
            self.session_flow(link, delivery_count=link.delivery_count, link_credit=0, drain=True)
        elif fields[9]:
            self.session_flow(
                link, delivery_count=link.delivery_count, link_credit=link.link_credit
            )

    def forget(self, link: Link) -> None:
        if isinstance(link, OutboundLink):
            self.outbound.pop(link.remote_handle, None)
            if link.on_timeout is not None:
                link.on_timeout.cancel()
            if link.entity is not None:
                self.broker.detach(link.entity, link)
            for delivery_id in [d for d, (owner, _) in self.unsettled.items() if owner is link]:
                del self.unsettled[delivery_id]  # message locks outlive the link (SDK falls
                # back to the management link), session locks do not (broker.detach)
        else:
            self.inbound.pop(link.remote_handle, None)

    def detach_link(self, link: Link, failure: Described | None) -> None:
        """Server-initiated detach of a live link (session lock lost, entity deleted)."""
        self.forget(link)
        self.send(DETACH, [UInt(link.handle), True, failure])
        self.handles.discard(link.handle)
        self.connection.flush()

    def end(self) -> None:
        for link in [*self.inbound.values(), *self.outbound.values()]:
            self.forget(link)

    # -------------------------------------------------------------- what the server sends

    def deliver(
        self, link: OutboundLink, message: Message, lock_token: uuid.UUID | None, locked_until: int
    ) -> None:
        session_link = link.session_id is not None
        payload = message.encode(
            locked_until=None if session_link or lock_token is None else locked_until
        )
        tag = (lock_token or uuid.uuid4()).bytes_le
        settled = lock_token is None
        delivery_id = self.next_delivery_id
        self.next_delivery_id += 1
        if not settled:
            assert lock_token is not None
            self.unsettled[delivery_id] = (link, lock_token)
        link.delivery_count += 1
        link.link_credit -= 1
        self.transfer(link, delivery_id, tag, payload, settled)

    def transfer(
        self, link: OutboundLink, delivery_id: int, tag: bytes, payload: bytes, settled: bool
    ) -> None:
        limit = self.connection.remote_max_frame - 128  # room for the frame and transfer headers
        chunks = [payload[i : i + limit] for i in range(0, len(payload), limit)] or [b""]
        last = len(chunks) - 1
        for index, chunk in enumerate(chunks):
            head = transfer_performative(link.handle, delivery_id, tag, settled, index < last)
            self.connection.write(frame(self.channel, head + chunk))
            self.next_outgoing_id += 1

    def reply(
        self, node: str, correlation_id: Any, app_properties: dict[str, Any], body: Any
    ) -> None:
        """A pre-settled response on our link whose source is ``node``, in this session."""
        link = next(
            (
                candidate
                for candidate in self.outbound.values()
                if candidate.kind != "entity" and entity_path(candidate.address) == node
            ),
            None,
        )
        if link is None:
            log.warning("no reply link for %s; the response is dropped", node)
            return
        properties = [None, None, None, None, None, correlation_id]
        out = encode(Described(ULong(0x73), properties)) + encode(
            Described(ULong(0x74), app_properties)
        )
        if body is not None:
            out += encode(Described(ULong(0x77), body))
        delivery_id = self.next_delivery_id
        self.next_delivery_id += 1
        link.delivery_count += 1
        self.transfer(link, delivery_id, struct.pack(">I", delivery_id), out, True)
