"""AMQP 1.0 over TCP: protocol headers, SASL, connections, sessions and links.

One :class:`Connection` per socket. Frames are handled strictly in order (the SDK pipelines
Open, Begin and its CBS attaches without waiting), each by a plain method that finishes before
the next frame is read, so the broker needs no locks. A malformed frame closes only its own
connection, with an AMQP error, and never the server.

Wire details the SDK depends on are in ../shared/servicebus-amqp.md; the comments below name
the ones that are easy to get wrong.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from . import management
from .broker import Broker, BrokerError, Entity, EntityNotFound, MessageTooLarge, Session, now_ms
from .codec import (
    Array,
    DecodeError,
    Described,
    Long,
    Symbol,
    UByte,
    UInt,
    ULong,
    UShort,
    decode,
    decode_all,
    encode,
)
from .message import DATA, Incoming, InvalidMessage, Message, parse, sections

log = logging.getLogger(__name__)

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_HEADER = b"AMQP\x03\x01\x00\x00"
MAX_FRAME_SIZE = 65536
BATCH_FORMAT = 0x80013700
SESSION_WINDOW = 65536
LINK_CREDIT = 10000
PRE_OPEN_FRAME_LIMIT = 64 * 1024
DOTNET_EPOCH_TICKS = 621355968000000000

OPEN, BEGIN, ATTACH, FLOW, TRANSFER, DISPOSITION, DETACH, END, CLOSE = range(0x10, 0x19)
SOURCE, TARGET, ERROR = 0x28, 0x29, 0x1D
RECEIVED, ACCEPTED, REJECTED, RELEASED, MODIFIED = 0x23, 0x24, 0x25, 0x26, 0x27
SASL_MECHANISMS, SASL_INIT, SASL_OUTCOME = 0x40, 0x41, 0x44
SESSION_FILTER = "com.microsoft:session-filter"


class ProtocolError(Exception):
    def __init__(self, condition: str, description: str) -> None:
        super().__init__(description)
        self.condition = condition
        self.description = description


def error(condition: str, description: str | None = None) -> Described:
    return Described(ULong(ERROR), [Symbol(condition), description, None])  # the SDK reads [2]


def performative(code: int, fields: list[Any]) -> bytes:
    while fields and fields[-1] is None:
        fields.pop()
    return encode(Described(ULong(code), fields))


def frame(channel: int, body: bytes, kind: int = 0) -> bytes:
    return _FRAME_HEADER.pack(8 + len(body), 2, kind, channel) + body


_FRAME_HEADER = struct.Struct(">IBBH")
_TRANSFER_FIELDS = struct.Struct(">BIBIB")
_ECHOES: dict[Any, bytes] = {}


def transfer_performative(
    handle: int, delivery_id: int, tag: bytes, settled: bool, more: bool
) -> bytes:
    """transfer(handle, delivery-id, delivery-tag, message-format 0, settled, more), hand-packed:
    it is written once per delivered message."""
    fields = (
        _TRANSFER_FIELDS.pack(0x70, handle, 0x70, delivery_id, 0xA0)
        + bytes((len(tag),))
        + tag
        + b"\x43"
        + (b"\x41" if settled else b"\x42")
        + (b"\x41" if more else b"\x42")
    )
    return b"\x00\x53\x14\xc0" + bytes((len(fields) + 1, 6)) + fields


def settled_disposition(delivery_id: int, outcome: Described) -> bytes:
    """disposition(role sender, first = last = delivery_id, settled, outcome), hand-packed."""
    state = _ECHOES.get(outcome.descriptor) if outcome.value == [] else None
    if state is None:
        state = encode(outcome)
        if outcome.value == []:
            _ECHOES[outcome.descriptor] = state
    ids = _U32.pack(delivery_id)
    fields = b"\x42\x70" + ids + b"\x70" + ids + b"\x41" + state
    return b"\x00\x53\x15\xc0" + bytes((len(fields) + 1, 5)) + fields


_U32 = struct.Struct(">I")
_SMALL_UINT = {0x43: 0, 0x40: None}


def _disposition_fields(body: memoryview) -> list[Any] | None:
    """role, first, last, settled, state of a list8 disposition, or None to decode it fully."""
    if len(body) < 7 or body[3] != 0xC0 or body[4] + 5 != len(body):
        return None
    fields: list[Any] = []
    pos = 6
    for index in range(min(body[5], 4)):
        code = body[pos]
        if index in (0, 3) and code in (0x41, 0x42, 0x40):
            fields.append(None if code == 0x40 else code == 0x41)
            pos += 1
        elif index in (1, 2) and code == 0x52:
            fields.append(body[pos + 1])
            pos += 2
        elif index in (1, 2) and code == 0x70:
            fields.append(_U32.unpack_from(body, pos + 1)[0])
            pos += 5
        elif index in (1, 2) and code in _SMALL_UINT:
            fields.append(_SMALL_UINT[code])
            pos += 1
        else:
            return None
    state = None
    if body[5] >= 5:
        state, pos = decode(body, pos)
    return [*fields, state] + [None] * 9


def field_list(value: Any, size: int) -> list[Any]:
    items = value.value if isinstance(value, Described) else value
    if not isinstance(items, list):
        raise ProtocolError("amqp:decode-error", "a performative's fields must be a list")
    return items + [None] * (size - len(items)) if len(items) < size else items


def entity_path(address: str | None) -> str:
    """``amqps://host:port/queue/$DeadLetterQueue`` or ``queue/$management`` -> the path."""
    if not address:
        return ""
    if "://" in address:
        address = address.split("://", 1)[1]
        address = address.split("/", 1)[1] if "/" in address else ""
    return address.strip("/")


def dotnet_ticks(ms: int) -> int:
    return ms * 10_000 + DOTNET_EPOCH_TICKS


# ----------------------------------------------------------------------------------- links


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


# ----------------------------------------------------------------------------------- session


class AmqpSession:
    def __init__(self, connection: Connection, channel: int, remote_channel: int) -> None:
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

    def _new_handle(self) -> int:
        handle = 0
        while handle in self.handles:
            handle += 1
        self.handles.add(handle)
        return handle

    # -------------------------------------------------------------- attach / detach

    def on_attach(self, fields: list[Any]) -> None:
        name, remote_handle, role, snd_mode, rcv_mode, source, target = fields[:7]
        properties = fields[13] if isinstance(fields[13], dict) else {}
        if not isinstance(name, str) or not isinstance(remote_handle, int):
            raise ProtocolError("amqp:invalid-field", "attach needs a name and a handle")
        if remote_handle in self.inbound or remote_handle in self.outbound:
            raise ProtocolError("amqp:session:handle-in-use", f"handle {remote_handle} is in use")
        source_fields = field_list(source, 11) if source is not None else [None] * 11
        target_fields = field_list(target, 7) if target is not None else [None] * 7
        handle = self._new_handle()
        if role:  # the client receives: we send
            self._attach_outbound(
                name, remote_handle, handle, snd_mode, rcv_mode, source, target, source_fields,
                properties,
            )  # fmt: skip
        else:
            self._attach_inbound(
                name, remote_handle, handle, snd_mode, rcv_mode, source, target, target_fields
            )

    def _attach_inbound(
        self, name, remote_handle, handle, snd_mode, rcv_mode, source, target, target_fields
    ) -> None:
        address = target_fields[0] if isinstance(target_fields[0], str) else ""
        path = entity_path(address)
        kind = (
            "cbs" if path == "$cbs" else "management" if path.endswith("/$management") else "entity"
        )
        link = InboundLink(name, remote_handle, handle, self, kind, address)
        self.inbound[remote_handle] = link
        try:
            if kind == "entity":
                link.entity = self.broker.entity(path)
                if link.entity.is_dead_letter:
                    raise EntityNotFound(f"Cannot send to the dead-letter sub-queue '{path}'.")
            elif kind == "management":
                link.entity = self.broker.entity(path.rsplit("/$management", 1)[0])
        except BrokerError as failure:
            self._refuse(link, role=True, failure=failure)
            return
        self.send(
            ATTACH,
            [name, UInt(handle), True, UByte(snd_mode or 0), UByte(rcv_mode or 0), source, target,
             None, None, None, ULong(1024 * 1024 if kind == "entity" else 0)],
        )  # fmt: skip
        self.session_flow(link, link_credit=LINK_CREDIT)

    def _attach_outbound(
        self, name, remote_handle, handle, snd_mode, rcv_mode, source, target, source_fields,
        properties,
    ) -> None:  # fmt: skip
        address = source_fields[0] if isinstance(source_fields[0], str) else ""
        path = entity_path(address)
        kind = (
            "cbs" if path == "$cbs" else "management" if path.endswith("/$management") else "entity"
        )
        link = OutboundLink(name, remote_handle, handle, self, kind, address)
        link.source, link.target = source, target
        link.receive_and_delete = snd_mode == 1
        self.outbound[remote_handle] = link
        if kind != "entity":
            self._complete_outbound_attach(link, snd_mode, rcv_mode, source, None)
            return
        filters = source_fields[7] if isinstance(source_fields[7], dict) else {}
        link.wants_session = SESSION_FILTER in filters
        try:
            link.entity = entity = self.broker.entity(path)
            if not link.wants_session:
                self.broker.attach(entity, link)
                self._complete_outbound_attach(link, snd_mode, rcv_mode, source, None)
                return
            requested = filters[SESSION_FILTER]
            requested = requested.value if isinstance(requested, Described) else requested
            if requested is not None and not isinstance(requested, str):
                raise BrokerError("The session filter must be a string session id or null.")

            def locked(session: Session) -> None:
                if link.on_timeout is not None:
                    link.on_timeout.cancel()
                self._complete_outbound_attach(link, snd_mode, rcv_mode, source, session)

            session = self.broker.lock_session(entity, link, requested, locked)
        except BrokerError as failure:
            self._refuse(link, role=False, failure=failure)
            return
        if session is not None:
            self._complete_outbound_attach(link, snd_mode, rcv_mode, source, session)
            return
        timeout = properties.get("com.microsoft:timeout")
        seconds = timeout / 1000 if isinstance(timeout, int) and timeout > 0 else 60.0

        def gave_up() -> None:
            if link.attached or self.outbound.get(remote_handle) is not link:
                return
            self.broker.stop_waiting(entity, link)
            self._refuse(
                link,
                role=False,
                failure=BrokerError("No session was available within the server timeout."),
                condition="com.microsoft:timeout",
            )
            self.connection.flush()

        link.on_timeout = asyncio.get_running_loop().call_later(seconds, gave_up)

    def _complete_outbound_attach(
        self, link: OutboundLink, snd_mode: Any, rcv_mode: Any, source: Any, session: Session | None
    ) -> None:
        link.attached = True
        properties = None
        if session is not None:
            fields = list(field_list(source, 11))
            filters = dict(fields[7]) if isinstance(fields[7], dict) else {}
            filters[Symbol(SESSION_FILTER)] = session.id
            fields[7] = filters
            source = Described(ULong(SOURCE), _trim(fields))
            properties = {
                Symbol("com.microsoft:locked-until-utc"): Long(dotnet_ticks(session.locked_until))
            }
        self.send(
            ATTACH,
            [link.name, UInt(link.handle), False, UByte(snd_mode or 0), UByte(rcv_mode or 0),
             source, link.target, None, None, UInt(0), ULong(1024 * 1024), None, None, properties],
        )  # fmt: skip
        if link.entity is not None and link.link_credit:
            self.broker.pump(link.entity, link.session_id)

    def _refuse(
        self, link: Link, *, role: bool, failure: BrokerError, condition: str | None = None
    ) -> None:
        """Service Bus's refusal: an attach with null source and target, then a detach."""
        self.send(ATTACH, [link.name, UInt(link.handle), role, None, None, None, None])
        self._forget(link)
        self.send(
            DETACH,
            [UInt(link.handle), True, error(condition or failure.condition, failure.description)],
        )
        self.handles.discard(link.handle)

    def _forget(self, link: Link) -> None:
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
        """Server-initiated detach of a live link (session lock lost)."""
        self._forget(link)
        self.send(DETACH, [UInt(link.handle), True, failure])
        self.handles.discard(link.handle)
        self.connection.flush()

    def on_detach(self, fields: list[Any]) -> None:
        link: Link | None = self.inbound.get(fields[0]) or self.outbound.get(fields[0])
        if link is None:
            return  # already detached by us; the client is answering our detach
        self._forget(link)
        self.send(DETACH, [UInt(link.handle), True])
        self.handles.discard(link.handle)

    def end(self) -> None:
        for link in [*self.inbound.values(), *self.outbound.values()]:
            self._forget(link)

    # -------------------------------------------------------------- flow

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

    # -------------------------------------------------------------- deliveries out

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

    # -------------------------------------------------------------- deliveries in

    def on_transfer(self, fields: list[Any], payload: memoryview) -> None:
        self.next_incoming_id += 1
        if self.next_incoming_id - self.window_base > SESSION_WINDOW // 2:
            self.session_flow()
        link = self.inbound.get(fields[0])
        if link is None:
            raise ProtocolError(
                "amqp:session:unattached-handle", f"transfer on unattached handle {fields[0]}"
            )
        if link.delivery_id is None or (not link.payload and fields[1] is not None):
            link.delivery_id = fields[1]
            link.tag = fields[2] or b""
            link.settled = bool(fields[4])
            link.message_format = fields[3] or 0
        if fields[9]:  # aborted
            link.payload.clear()
            link.delivery_id = None
            return
        link.payload += payload
        if len(link.payload) > 2 * 1024 * 1024:
            raise ProtocolError(
                "amqp:frame-size-too-small", "a delivery larger than 2 MiB was refused"
            )
        if fields[5]:  # more
            return
        data = bytes(link.payload)
        link.payload.clear()
        delivery_id, settled = link.delivery_id, link.settled
        link.delivery_id = None
        link.received += 1
        if link.received % (LINK_CREDIT // 2) == 0:
            self.session_flow(link, delivery_count=link.received, link_credit=LINK_CREDIT)
        outcome = self._enqueue(link, data) if link.kind == "entity" else self._request(link, data)
        if not settled and delivery_id is not None:
            self.send(DISPOSITION, [True, UInt(delivery_id), UInt(delivery_id), True, outcome])

    def _enqueue(self, link: InboundLink, data: bytes) -> Described:
        assert link.entity is not None
        try:
            if link.message_format == BATCH_FORMAT:
                messages: list[tuple[Incoming, int]] = []
                for code, start, _ in sections(data):
                    if code != DATA:
                        continue
                    inner = decode(memoryview(data), start + 3)[0]
                    if len(inner) > 1024 * 1024:
                        raise MessageTooLarge(
                            f"A message in the batch ({len(inner)} bytes) exceeds the limit "
                            "(1048576 bytes) currently allowed on the link."
                        )
                    messages.append((parse(inner), len(inner)))
                if len(data) > 1024 * 1024 + 64 * 1024:
                    raise MessageTooLarge(
                        f"The batch ({len(data)} bytes) exceeds the limit (1048576 bytes)."
                    )
                if link.entity.requires_session and any(not m.session_id for m, _ in messages):
                    self.broker.send(
                        link.entity, next(m for m, _ in messages if not m.session_id), 0
                    )
                for incoming, size in messages:
                    self.broker.send(link.entity, incoming, size)
            else:
                self.broker.send(link.entity, parse(data), len(data))
            self.broker.store.commit()
        except BrokerError as failure:
            return Described(ULong(REJECTED), [error(failure.condition, failure.description)])
        except DecodeError as failure:
            return Described(
                ULong(REJECTED),
                [error("amqp:decode-error", f"The message is malformed: {failure}")],
            )
        return Described(ULong(ACCEPTED), [])

    def _request(self, link: InboundLink, data: bytes) -> Described:
        try:
            request = management.Request.decode(data)
        except (DecodeError, InvalidMessage) as failure:
            return Described(
                ULong(REJECTED), [error("amqp:decode-error", f"malformed request: {failure}")]
            )
        node = entity_path(link.address)
        if link.kind == "cbs":
            status, description = management.put_token(request)
            self.reply(
                node,
                request.message_id,
                {"status-code": status, "status-description": description},
                None,
            )
        else:
            assert link.entity is not None
            response = management.handle(self, link.entity, request)
            app = {"statusCode": response.status, "statusDescription": response.description}
            if response.condition:
                app["errorCondition"] = Symbol(response.condition)
            self.reply(node, request.message_id, app, response.body)
        return Described(ULong(ACCEPTED), [])

    def on_disposition(self, fields: list[Any]) -> None:
        role, first, last, settled, state = fields[:5]
        if not role or not isinstance(first, int):
            return  # settlements of our pre-settled replies: nothing to do
        last = last if isinstance(last, int) else first
        for delivery_id in range(first, min(last, first + 10_000) + 1):
            found = self.unsettled.pop(delivery_id, None)
            if found is None:
                continue
            link, token = found
            echo = self._settle(link, token, state)
            if not settled and echo is not None:
                self.connection.write(frame(self.channel, settled_disposition(delivery_id, echo)))

    def _settle(self, link: OutboundLink, token: uuid.UUID, state: Any) -> Described | None:
        code = state.descriptor if isinstance(state, Described) else None
        values = field_list(state.value, 3) if isinstance(state, Described) else []
        sid = link.session_id
        try:
            if code == ACCEPTED:
                self.broker.complete(token, sid)
            elif code == RELEASED:
                self.broker.release(token)
            elif code == MODIFIED:
                if values[1]:  # undeliverable-here: the SDK's defer
                    self.broker.defer(token, sid)
                else:
                    self.broker.abandon(token, sid)
            elif code == REJECTED:
                reason, description = management.dead_letter_fields(values[0])
                self.broker.dead_letter(token, reason, description, sid)
                return Described(ULong(REJECTED), [])
            else:
                return None
        except BrokerError as failure:
            return Described(ULong(REJECTED), [error(failure.condition, failure.description)])
        finally:
            if link.entity is not None:
                self.broker.pump(link.entity, sid)
        return Described(ULong(code), [])


def _trim(fields: list[Any]) -> list[Any]:
    while fields and fields[-1] is None:
        fields.pop()
    return fields


# ----------------------------------------------------------------------------------- connection


class Connection(asyncio.Protocol):
    """One client connection: parses frames as bytes arrive (no stream reader, no task per
    connection: a completion round trip is one callback) and dispatches them synchronously."""

    HANDSHAKE_TIMEOUT = 30.0
    WRITE_BUFFER_HIGH = 4 * 1024 * 1024  # beyond this, stop reading until the client catches up

    def __init__(self, broker: Broker, registry: set[Connection] | None = None) -> None:
        self.broker = broker
        self.registry = registry if registry is not None else set()
        self.transport: asyncio.Transport | None = None
        self.sessions: dict[int, AmqpSession] = {}  # by the client's channel
        self.remote_max_frame = 512
        self.opened = False
        self.closed = False
        self.heartbeat: asyncio.Task[None] | None = None
        self.peer: Any = None
        self.ended: set[int] = set()  # channels the client ended; late frames are ignored
        self._stage = _HEADER  # protocol header, then SASL init, then the AMQP header, frames
        self._out = bytearray()
        self._flush_scheduled = False
        self._dispatching = False
        self._in = bytearray()
        self._deadline: asyncio.TimerHandle | None = None

    # ---------------------------------------------------------------- transport callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self.registry.add(self)
        self.peer = transport.get_extra_info("peername")
        sock = transport.get_extra_info("socket")
        if sock is not None:  # small frames must not wait for Nagle + delayed ACK (40 ms)
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.transport.set_write_buffer_limits(high=self.WRITE_BUFFER_HIGH)
        self._deadline = asyncio.get_running_loop().call_later(
            self.HANDSHAKE_TIMEOUT, self._handshake_timed_out
        )

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self._in += data
        self._dispatching = True
        try:
            self._process()
        except ProtocolError as failure:
            log.info("closing %s: %s", self.peer, failure.description)
            self._close(error(failure.condition, failure.description))
        except DecodeError as failure:
            log.info("closing %s: malformed frame: %s", self.peer, failure)
            self._close(error("amqp:decode-error", str(failure)))
        except ConnectionError:
            self.closed = True
        except Exception:
            log.exception("internal error on the connection from %s", self.peer)
            self._close(error("amqp:internal-error", "The emulator hit an internal error."))
        finally:
            self._dispatching = False
        self.flush()
        if self.closed:
            self._cleanup()

    def eof_received(self) -> bool | None:
        return None  # close the transport; connection_lost cleans up

    def connection_lost(self, exc: Exception | None) -> None:
        self._cleanup()

    def pause_writing(self) -> None:
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.resume_reading()

    # ---------------------------------------------------------------- output

    def write(self, data: bytes) -> None:
        """Queue bytes; everything queued while handling one read, or in one turn of the event
        loop, goes out as one write."""
        if self.closed:
            return
        self._out += data
        if not self._dispatching and not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        self._flush_scheduled = False
        if self._out and self.transport is not None and not self.transport.is_closing():
            self.transport.write(bytes(self._out))
        self._out.clear()

    # ---------------------------------------------------------------- input

    def _process(self) -> None:
        """Handle every complete header and frame in the buffer; keep the incomplete rest."""
        buffer = self._in
        pos = 0
        try:
            while not self.closed:
                available = len(buffer) - pos
                if self._stage != _FRAMES and self._stage != _SASL_INIT:
                    if available < 8:
                        break
                    self._on_protocol_header(bytes(buffer[pos : pos + 8]))
                    pos += 8
                    continue
                if available < 8:
                    break
                size, doff, kind, channel = _FRAME_HEADER.unpack_from(buffer, pos)
                limit = MAX_FRAME_SIZE if self.opened else PRE_OPEN_FRAME_LIMIT
                if size < 8 or size > limit or doff < 2 or doff * 4 > size:
                    raise ProtocolError(
                        "amqp:connection:framing-error",
                        f"invalid frame header (size {size}, doff {doff}); "
                        f"max frame size is {limit}",
                    )
                if available < size:
                    break
                body = memoryview(bytes(buffer[pos + doff * 4 : pos + size]))
                pos += size
                sasl = self._stage == _SASL_INIT
                if kind != (1 if sasl else 0):
                    raise ProtocolError(
                        "amqp:connection:framing-error", f"unexpected frame type {kind}"
                    )
                if not body:
                    if sasl:
                        raise ProtocolError("amqp:not-allowed", "expected sasl-init")
                    continue  # heartbeat
                if sasl:
                    self._on_sasl_init(body)
                    continue
                if body[:3] == b"\x00\x53\x15":  # disposition: one per settled message
                    fields = _disposition_fields(body)
                    if fields is not None:
                        self._dispatch(channel, DISPOSITION, fields, body[:0])
                        continue
                value, end = decode(body, 0)
                if not isinstance(value, Described) or not isinstance(value.descriptor, int):
                    raise ProtocolError(
                        "amqp:decode-error", "a frame body must be a described list"
                    )
                self._dispatch(channel, value.descriptor, field_list(value.value, 14), body[end:])
        finally:
            del buffer[:pos]

    def _on_protocol_header(self, header: bytes) -> None:
        if self._stage == _HEADER and header == SASL_HEADER:
            self.write(SASL_HEADER)
            mechanisms = Array(0xB3, ("ANONYMOUS", "MSSBCBS", "PLAIN"))
            self.write(frame(0, performative(SASL_MECHANISMS, [mechanisms]), kind=1))
            self._stage = _SASL_INIT
            return
        self.write(AMQP_HEADER)
        if header != AMQP_HEADER:
            raise ConnectionError("unsupported protocol header")
        self._stage = _FRAMES
        if self._deadline is not None:
            self._deadline.cancel()

    def _on_sasl_init(self, body: memoryview) -> None:
        value, _ = decode(body, 0)
        if not isinstance(value, Described) or value.descriptor != SASL_INIT:
            raise ProtocolError("amqp:not-allowed", "expected sasl-init")
        self.write(frame(0, performative(SASL_OUTCOME, [UByte(0)]), kind=1))
        self._stage = _AMQP_HEADER

    def _handshake_timed_out(self) -> None:
        if self._stage != _FRAMES and self.transport is not None:
            log.info("closing %s: no AMQP handshake within %ss", self.peer, self.HANDSHAKE_TIMEOUT)
            self.transport.close()

    def _dispatch(self, channel: int, code: int, fields: list[Any], payload: memoryview) -> None:
        if code == OPEN:
            self._on_open(fields)
            return
        if not self.opened:
            raise ProtocolError("amqp:not-allowed", "the first frame must be open")
        if code == CLOSE:
            self.write(frame(0, performative(CLOSE, [])))
            self.closed = True
            return
        if code == BEGIN:
            if channel in self.sessions:
                raise ProtocolError("amqp:not-allowed", f"channel {channel} is in use")
            local = 0
            used = {s.channel for s in self.sessions.values()}
            while local in used:
                local += 1
            session = self.sessions[channel] = AmqpSession(self, local, channel)
            session.next_incoming_id = fields[1] if isinstance(fields[1], int) else 0
            session.window_base = session.next_incoming_id
            session.send(
                BEGIN,
                [UShort(channel), UInt(0), UInt(SESSION_WINDOW), UInt(SESSION_WINDOW),
                 UInt(0xFFFFFFFF)],
            )  # fmt: skip
            return
        found = self.sessions.get(channel)
        if found is None and channel in self.ended:
            return  # the client ends a session and may still send for it; nothing to do
        if found is None:
            raise ProtocolError("amqp:not-found", f"no session on channel {channel}")
        session = found
        if code == ATTACH:
            session.on_attach(fields)
        elif code == FLOW:
            session.on_flow(fields)
        elif code == TRANSFER:
            session.on_transfer(fields, payload)
        elif code == DISPOSITION:
            session.on_disposition(fields)
        elif code == DETACH:
            session.on_detach(fields)
        elif code == END:
            session.end()
            del self.sessions[channel]
            self.ended.add(channel)
            session.send(END, [])
        else:
            raise ProtocolError("amqp:not-implemented", f"unknown performative 0x{code:02x}")

    def _on_open(self, fields: list[Any]) -> None:
        if self.opened:
            raise ProtocolError("amqp:not-allowed", "open was already received")
        self.opened = True
        max_frame = fields[2] if isinstance(fields[2], int) else 0xFFFFFFFF
        self.remote_max_frame = max(512, min(max_frame, 1024 * 1024))
        idle = fields[4]
        self.write(
            frame(
                0,
                performative(
                    OPEN,
                    ["servicebus-emulator", None, UInt(MAX_FRAME_SIZE), UShort(65535), None],
                ),
            )
        )
        if isinstance(idle, int) and idle > 0:
            self.heartbeat = asyncio.get_running_loop().create_task(self._beat(idle / 2000))

    async def _beat(self, interval: float) -> None:
        while not self.closed:
            await asyncio.sleep(interval)
            self.write(struct.pack(">IBBH", 8, 2, 0, 0))

    def _close(self, failure: Described) -> None:
        if not self.closed:
            try:
                if self.opened:
                    self.write(frame(0, performative(CLOSE, [failure])))
            finally:
                self.closed = True

    def _cleanup(self) -> None:
        """Idempotent: after a close, an error or the client going away."""
        self.closed = True
        self.registry.discard(self)
        if self._deadline is not None:
            self._deadline.cancel()
        if self.heartbeat is not None:
            self.heartbeat.cancel()
        sessions = list(self.sessions.values())
        self.sessions.clear()
        for session in sessions:
            session.end()
        if self.transport is not None and not self.transport.is_closing():
            with contextlib.suppress(Exception):
                if self._out:
                    self.transport.write(bytes(self._out))
                self._out.clear()
                self.transport.close()


_HEADER, _SASL_INIT, _AMQP_HEADER, _FRAMES = range(4)


def ticks_now() -> int:
    return dotnet_ticks(now_ms())


__all__ = ["Callable", "Connection", "ProtocolError", "decode_all"]
