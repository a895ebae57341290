"""Link attach and detach on an AMQP session: which entity or node a link is for, Service Bus's
way of refusing one, and session receivers (named, or waiting for the next available session).
What a detach ends (a session lock does, message locks do not) is AmqpSession.forget's.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .codec import Described, Long, Symbol, UByte, UInt, ULong
from .entities import SUBSCRIPTION, TOPIC, Session
from .errors import BrokerError, EntityNotFound, NotAllowed
from .framing import (
    ATTACH,
    DETACH,
    LINK_CREDIT,
    SESSION_FILTER,
    SOURCE,
    ProtocolError,
    dotnet_ticks,
    entity_path,
    error,
    field_list,
    trim,
)
from .links import InboundLink, Link, OutboundLink

if TYPE_CHECKING:
    from .session import AmqpSession


@dataclass
class Attach:
    """The fields of the client's attach that the reply and the link need."""

    name: str
    remote_handle: int
    handle: int
    snd_mode: Any
    rcv_mode: Any
    source: Any
    target: Any
    source_fields: list[Any]
    target_fields: list[Any]
    properties: dict[Any, Any]


def on_attach(amqp: AmqpSession, fields: list[Any]) -> None:
    name, remote_handle, role, snd_mode, rcv_mode, source, target = fields[:7]
    if not isinstance(name, str) or not isinstance(remote_handle, int):
        raise ProtocolError("amqp:invalid-field", "attach needs a name and a handle")
    if remote_handle in amqp.inbound or remote_handle in amqp.outbound:
        raise ProtocolError("amqp:session:handle-in-use", f"handle {remote_handle} is in use")
    request = Attach(
        name=name,
        remote_handle=remote_handle,
        handle=amqp.new_handle(),
        snd_mode=snd_mode,
        rcv_mode=rcv_mode,
        source=source,
        target=target,
        source_fields=field_list(source, 11) if source is not None else [None] * 11,
        target_fields=field_list(target, 7) if target is not None else [None] * 7,
        properties=fields[13] if isinstance(fields[13], dict) else {},
    )
    if role:  # the client receives: we send
        _attach_outbound(amqp, request)
    else:
        _attach_inbound(amqp, request)


def _kind(path: str) -> str:
    return "cbs" if path == "$cbs" else "management" if path.endswith("/$management") else "entity"


def _attach_inbound(amqp: AmqpSession, request: Attach) -> None:
    address = request.target_fields[0] if isinstance(request.target_fields[0], str) else ""
    path = entity_path(address)
    kind = _kind(path)
    link = InboundLink(request.name, request.remote_handle, request.handle, amqp, kind, address)
    amqp.inbound[request.remote_handle] = link
    try:
        if kind == "entity":
            link.entity = amqp.broker.entity(path)
            if link.entity.is_dead_letter:
                raise EntityNotFound(f"Cannot send to the dead-letter sub-queue '{path}'.")
            if link.entity.kind == SUBSCRIPTION:
                raise NotAllowed(f"Cannot send to the subscription '{path}'; send to its topic.")
        elif kind == "management":
            link.entity = amqp.broker.entity(path.rsplit("/$management", 1)[0])
    except BrokerError as failure:
        refuse(amqp, link, role=True, failure=failure)
        return
    amqp.send(
        ATTACH,
        [request.name, UInt(request.handle), True, UByte(request.snd_mode or 0),
         UByte(request.rcv_mode or 0), request.source, request.target, None, None, None,
         ULong(1024 * 1024 if kind == "entity" else 0)],
    )  # fmt: skip
    amqp.session_flow(link, link_credit=LINK_CREDIT)


def _attach_outbound(amqp: AmqpSession, request: Attach) -> None:
    address = request.source_fields[0] if isinstance(request.source_fields[0], str) else ""
    path = entity_path(address)
    kind = _kind(path)
    link = OutboundLink(request.name, request.remote_handle, request.handle, amqp, kind, address)
    link.source, link.target = request.source, request.target
    link.receive_and_delete = request.snd_mode == 1
    amqp.outbound[request.remote_handle] = link
    if kind != "entity":
        _complete_outbound_attach(amqp, link, request, None)
        return
    filters = request.source_fields[7] if isinstance(request.source_fields[7], dict) else {}
    link.wants_session = SESSION_FILTER in filters
    try:
        link.entity = entity = amqp.broker.entity(path)
        if entity.kind == TOPIC:
            raise NotAllowed(
                f"Cannot receive from the topic '{path}'; receive from one of its subscriptions."
            )
        if not link.wants_session:
            amqp.broker.attach(entity, link)
            _complete_outbound_attach(amqp, link, request, None)
            return
        requested = filters[SESSION_FILTER]
        requested = requested.value if isinstance(requested, Described) else requested
        if requested is not None and not isinstance(requested, str):
            raise BrokerError("The session filter must be a string session id or null.")

        def locked(session: Session) -> None:
            if link.on_timeout is not None:
                link.on_timeout.cancel()
            _complete_outbound_attach(amqp, link, request, session)

        session = amqp.broker.sessions.lock(entity, link, requested, locked)
    except BrokerError as failure:
        refuse(amqp, link, role=False, failure=failure)
        return
    if session is not None:
        _complete_outbound_attach(amqp, link, request, session)
        return
    timeout = request.properties.get("com.microsoft:timeout")
    seconds = timeout / 1000 if isinstance(timeout, int) and timeout > 0 else 60.0

    def gave_up() -> None:
        if link.attached or amqp.outbound.get(request.remote_handle) is not link:
            return
        amqp.broker.sessions.stop_waiting(entity, link)
        amqp.broker.operations.count(entity, "accept session (none available)")
        refuse(
            amqp,
            link,
            role=False,
            failure=BrokerError("No session was available within the server timeout."),
            condition="com.microsoft:timeout",
        )
        amqp.connection.flush()

    link.on_timeout = asyncio.get_running_loop().call_later(seconds, gave_up)


def _complete_outbound_attach(
    amqp: AmqpSession, link: OutboundLink, request: Attach, session: Session | None
) -> None:
    link.attached = True
    source = request.source
    properties = None
    if session is not None:
        amqp.broker.operations.count(link.entity, "accept session")
        fields = list(field_list(source, 11))
        filters = dict(fields[7]) if isinstance(fields[7], dict) else {}
        filters[Symbol(SESSION_FILTER)] = session.id
        fields[7] = filters
        source = Described(ULong(SOURCE), trim(fields))
        properties = {
            Symbol("com.microsoft:locked-until-utc"): Long(dotnet_ticks(session.locked_until))
        }
    amqp.send(
        ATTACH,
        [link.name, UInt(link.handle), False, UByte(request.snd_mode or 0),
         UByte(request.rcv_mode or 0), source, link.target, None, None, UInt(0),
         ULong(1024 * 1024), None, None, properties],
    )  # fmt: skip
    if link.entity is not None and link.link_credit:
        amqp.broker.pump(link.entity, link.session_id)


def refuse(
    amqp: AmqpSession,
    link: Link,
    *,
    role: bool,
    failure: BrokerError,
    condition: str | None = None,
) -> None:
    """Service Bus's refusal: an attach with null source and target, then a detach."""
    amqp.send(ATTACH, [link.name, UInt(link.handle), role, None, None, None, None])
    amqp.forget(link)
    amqp.send(
        DETACH,
        [UInt(link.handle), True, error(condition or failure.condition, failure.description)],
    )
    amqp.handles.discard(link.handle)


def on_detach(amqp: AmqpSession, fields: list[Any]) -> None:
    link: Link | None = amqp.inbound.get(fields[0]) or amqp.outbound.get(fields[0])
    if link is None:
        return  # already detached by us; the client is answering our detach
    if isinstance(link, OutboundLink) and link.session_id is not None and link.attached:
        amqp.broker.operations.count(link.entity, "close session receiver")
    amqp.forget(link)
    amqp.send(DETACH, [UInt(link.handle), True])
    amqp.handles.discard(link.handle)
