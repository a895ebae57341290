"""The client's dispositions of messages it received: the outcome says what to do with the
message (accepted = complete, released, modified = abandon or defer, rejected = dead-letter),
and an unsettled disposition gets a settled echo of the outcome, or a rejection with the error."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from . import management
from .codec import Described, ULong
from .errors import BrokerError
from .framing import ACCEPTED, MODIFIED, REJECTED, RELEASED, error, field_list, frame
from .framing import settled_disposition as settled_disposition_frame
from .links import OutboundLink

if TYPE_CHECKING:
    from .broker import Broker
    from .session import AmqpSession


_SETTLEMENTS = {
    ACCEPTED: "complete",
    RELEASED: "release (message)",
    MODIFIED: "abandon or defer",
    REJECTED: "dead-letter",
}


def on_disposition(amqp: AmqpSession, fields: list[Any]) -> None:
    role, first, last, settled, state = fields[:5]
    if not role or not isinstance(first, int):
        return  # settlements of our pre-settled replies: nothing to do
    last = last if isinstance(last, int) else first
    for delivery_id in range(first, min(last, first + 10_000) + 1):
        found = amqp.unsettled.pop(delivery_id, None)
        if found is None:
            continue
        link, token = found
        echo = _settle(amqp.broker, link, token, state)
        if not settled and echo is not None:
            amqp.connection.write(frame(amqp.channel, settled_disposition_frame(delivery_id, echo)))


def _settle(broker: Broker, link: OutboundLink, token: uuid.UUID, state: Any) -> Described | None:
    code = state.descriptor if isinstance(state, Described) else None
    values = field_list(state.value, 3) if isinstance(state, Described) else []
    sid = link.session_id
    broker.operations.count(link.entity, _SETTLEMENTS.get(int(code or 0), "settle (other)"))
    try:
        if code == ACCEPTED:
            broker.complete(token, sid)
        elif code == RELEASED:
            broker.release(token)
        elif code == MODIFIED:  # message-annotations: the SDKs' propertiesToModify
            changes = management.properties_to_modify(values[2])
            if values[1]:  # undeliverable-here: the SDK's defer
                broker.defer(token, sid, changes)
            else:
                broker.abandon(token, sid, changes)
        elif code == REJECTED:
            reason, description, changes = management.dead_letter_fields(values[0])
            broker.dead_letter(token, reason, description, sid, changes)
            return Described(ULong(REJECTED), [])
        else:
            return None
    except BrokerError as failure:
        return Described(ULong(REJECTED), [error(failure.condition, failure.description)])
    finally:
        if link.entity is not None:
            broker.pump(link.entity, sid)
    return Described(ULong(code), [])
