"""What the client sends on an AMQP session: transfers (reassembled from several frames when
large), which are messages for an entity (single or batched) or requests to ``$cbs`` or an
entity's ``$management`` node; each gets its outcome as a settled disposition."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import management
from .codec import DecodeError, Described, Symbol, UInt, ULong, decode
from .errors import BrokerError, MessageTooLarge
from .framing import (
    ACCEPTED,
    BATCH_FORMAT,
    DISPOSITION,
    LINK_CREDIT,
    REJECTED,
    SESSION_WINDOW,
    ProtocolError,
    entity_path,
    error,
)
from .links import InboundLink
from .message import Incoming, parse
from .sections import DATA, InvalidMessage, sections

if TYPE_CHECKING:
    from .broker import Broker
    from .session import AmqpSession

MAX_DELIVERY = 2 * 1024 * 1024
MAX_BATCH = 1024 * 1024 + 64 * 1024


def on_transfer(amqp: AmqpSession, fields: list[Any], payload: memoryview) -> None:
    amqp.next_incoming_id += 1
    if amqp.next_incoming_id - amqp.window_base > SESSION_WINDOW // 2:
        amqp.session_flow()
    link = amqp.inbound.get(fields[0])
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
    if len(link.payload) > MAX_DELIVERY:
        raise ProtocolError("amqp:frame-size-too-small", "a delivery larger than 2 MiB was refused")
    if fields[5]:  # more
        return
    data = bytes(link.payload)
    link.payload.clear()
    delivery_id, settled = link.delivery_id, link.settled
    link.delivery_id = None
    link.received += 1
    if link.received % (LINK_CREDIT // 2) == 0:
        amqp.session_flow(link, delivery_count=link.received, link_credit=LINK_CREDIT)
    if link.kind == "entity":
        outcome = _enqueue(amqp.broker, link, data)
    else:
        outcome = _request(amqp, link, data)
    if not settled and delivery_id is not None:
        amqp.send(DISPOSITION, [True, UInt(delivery_id), UInt(delivery_id), True, outcome])


def _enqueue(broker: Broker, link: InboundLink, data: bytes) -> Described:
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
            if len(data) > MAX_BATCH:
                raise MessageTooLarge(
                    f"The batch ({len(data)} bytes) exceeds the limit (1048576 bytes)."
                )
            if link.entity.requires_session and any(not m.session_id for m, _ in messages):
                broker.send(link.entity, next(m for m, _ in messages if not m.session_id), 0)
            for incoming, size in messages:
                broker.send(link.entity, incoming, size)
            broker.operations.count(link.entity, "send (messages)", len(messages))
            broker.operations.count(link.entity, "send (batches)")
        else:
            broker.send(link.entity, parse(data), len(data))
            broker.operations.count(link.entity, "send (messages)")
        broker.store.commit()
    except BrokerError as failure:
        return Described(ULong(REJECTED), [error(failure.condition, failure.description)])
    except DecodeError as failure:
        return Described(
            ULong(REJECTED),
            [error("amqp:decode-error", f"The message is malformed: {failure}")],
        )
    return Described(ULong(ACCEPTED), [])


def _request(amqp: AmqpSession, link: InboundLink, data: bytes) -> Described:
    try:
        request = management.Request.decode(data)
    except (DecodeError, InvalidMessage) as failure:
        return Described(
            ULong(REJECTED), [error("amqp:decode-error", f"malformed request: {failure}")]
        )
    node = entity_path(link.address)
    if link.kind == "cbs":
        status, description = management.put_token(request)
        amqp.reply(
            node,
            request.message_id,
            {"status-code": status, "status-description": description},
            None,
        )
    else:
        assert link.entity is not None
        response = management.handle(amqp, link.entity, request)
        app = {"statusCode": response.status, "statusDescription": response.description}
        if response.condition:
            app["errorCondition"] = Symbol(response.condition)
        amqp.reply(node, request.message_id, app, response.body)
    return Described(ULong(ACCEPTED), [])
