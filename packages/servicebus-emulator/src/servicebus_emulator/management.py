"""Request/response operations on ``$cbs`` and ``<entity>/$management``.

Each management request is an AMQP message whose application property ``operation`` names the
operation and whose amqp-value body is a map; the reply carries ``statusCode``,
``statusDescription`` and, on failure, ``errorCondition`` (the SDK maps the condition, not the
status, to its exceptions).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .codec import Array, Described, Int, Long, Timestamp, decode_all
from .entities import Consumer, Entity
from .errors import BrokerError, MessageNotFound
from .sections import AMQP_VALUE, APPLICATION_PROPERTIES, PROPERTIES, InvalidMessage, sections

if TYPE_CHECKING:
    from .broker import Broker

NO_FILTER = 253402300800000  # the SDK's "any time" for last-updated-time


class Requester(Protocol):
    """The AMQP session a management request came on, as the operations use it."""

    @property
    def broker(self) -> Broker: ...

    def receiver(self, name: str | None) -> Consumer | None:
        """This session's receive link called ``name`` (the request's associated link)."""


@dataclass
class Request:
    message_id: Any
    properties: dict[str, Any]
    body: Any

    @classmethod
    def decode(cls, data: bytes) -> Request:
        message_id = None
        properties: dict[str, Any] = {}
        body: Any = None
        for code, start, end in sections(data):
            value = decode_all(data[start:end]).value
            if code == PROPERTIES and isinstance(value, list) and value:
                message_id = value[0]
            elif code == APPLICATION_PROPERTIES and isinstance(value, dict):
                properties = value
            elif code == AMQP_VALUE:
                body = value
        return cls(message_id, properties, body)

    def field(self, name: str, kind: type | tuple[type, ...], *, required: bool = True) -> Any:
        body = self.body if isinstance(self.body, dict) else {}
        value = body.get(name)
        if value is None and not required:
            return None
        if not isinstance(value, kind):
            raise BrokerError(f"The request body must have '{name}' of the right type.")
        return value


@dataclass
class Response:
    status: int
    description: str
    body: Any = None
    condition: str | None = None


def put_token(request: Request) -> tuple[int, str]:
    """Tokens are not checked; a request that is not a put-token gets Service Bus's errors."""
    props = request.properties
    if props.get("operation") != "put-token":
        return 400, f"Unsupported CBS operation {props.get('operation')!r}; expected 'put-token'."
    missing = [key for key in ("name", "type") if not isinstance(props.get(key), str)]
    if missing or not isinstance(request.body, str | bytes):
        return 400, f"The put-token request is malformed: missing {missing or ['token body']}."
    if props["type"] not in ("jwt", "servicebus.windows.net:sastoken"):
        return 400, f"Unsupported token type {props['type']!r}."
    return 202, "Accepted"


DEAD_LETTER_REASON, DEAD_LETTER_DESCRIPTION = "DeadLetterReason", "DeadLetterErrorDescription"


def properties_to_modify(value: Any) -> dict[str, Any]:
    """Application properties a settlement modifies (the SDKs' propertiesToModify): a map with
    string or symbol keys, as the ``modified`` outcome, a dead-letter ``rejected`` outcome's
    error info and the ``properties-to-modify`` of update-disposition carry them."""
    if not isinstance(value, dict):
        return {}
    return {str(key): item for key, item in value.items() if isinstance(key, str)}


def dead_letter_fields(failure: Any) -> tuple[str | None, str | None, dict[str, Any]]:
    """Reason, description and properties to modify from a ``rejected`` outcome's error (the
    SDKs' dead-letter: the reason and description ride in the error's info map)."""
    if not isinstance(failure, Described) or not isinstance(failure.value, list):
        return None, None, {}
    fields = failure.value + [None] * 3
    properties = properties_to_modify(fields[2])
    reason = properties.pop(DEAD_LETTER_REASON, None)
    description = properties.pop(DEAD_LETTER_DESCRIPTION, None)
    return (
        reason if isinstance(reason, str) else None,
        description if isinstance(description, str) else None,
        properties,
    )


def handle(session: Requester, entity: Entity, request: Request) -> Response:
    operation = request.properties.get("operation")
    handler = _OPERATIONS.get(
        operation.removeprefix("com.microsoft:") if isinstance(operation, str) else ""
    )
    if handler is not None:
        session.broker.operations.count(entity, str(operation).removeprefix("com.microsoft:"))
    if handler is None:
        return Response(
            400,
            f"The operation {operation!r} is not supported.",
            condition="com.microsoft:argument-error",
        )
    try:
        return handler(session, entity, request)
    except BrokerError as failure:
        return Response(failure.status, failure.description, condition=failure.condition)


def _link_name(request: Request) -> str | None:
    name = request.properties.get("associated-link-name")
    return name if isinstance(name, str) else None


def _session_id(request: Request) -> str | None:
    return request.field("session-id", str, required=False)


def _tokens(request: Request) -> list[uuid.UUID]:
    tokens = request.field("lock-tokens", list)
    if not all(isinstance(token, uuid.UUID) for token in tokens):
        raise BrokerError("lock-tokens must be an array of uuid.")
    return tokens


def _sequence_numbers(request: Request) -> list[int]:
    numbers = request.field("sequence-numbers", list)
    if not all(isinstance(n, int) for n in numbers):
        raise BrokerError("sequence-numbers must be an array of long.")
    return numbers


def renew_lock(session: Requester, entity: Entity, request: Request) -> Response:
    expirations = [session.broker.locks.renew(token) for token in _tokens(request)]
    return Response(200, "OK", {"expirations": Array(0x83, tuple(expirations))})


def renew_session_lock(session: Requester, entity: Entity, request: Request) -> Response:
    sid = request.field("session-id", str)
    until = session.broker.sessions.renew(entity, sid, _link_name(request))
    return Response(200, "OK", {"expiration": Timestamp(until)})


def get_session_state(session: Requester, entity: Entity, request: Request) -> Response:
    sid = request.field("session-id", str)
    state = session.broker.sessions.state(entity, sid, _link_name(request))
    return Response(200, "OK", {"session-state": state})


def set_session_state(session: Requester, entity: Entity, request: Request) -> Response:
    sid = request.field("session-id", str)
    state = request.field("session-state", (bytes, str), required=False)
    if isinstance(state, str):
        state = state.encode()
    session.broker.sessions.set_state(entity, sid, state, _link_name(request))
    return Response(200, "OK")


def peek_message(session: Requester, entity: Entity, request: Request) -> Response:
    start = request.field("from-sequence-number", int, required=False) or 1
    count = request.field("message-count", int, required=False) or 1
    messages = session.broker.peek(entity, start, max(1, min(count, 1000)), _session_id(request))
    if not messages:
        return Response(204, "No messages")
    return Response(
        200,
        "OK",
        {"messages": [{"message": message.encode(locked_until=None)} for message in messages]},
    )


def schedule_message(session: Requester, entity: Entity, request: Request) -> Response:
    from .message import parse

    items = request.field("messages", list)
    numbers = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("message"), bytes):
            raise BrokerError("Each scheduled message must be a map with a 'message' binary.")
        raw = item["message"]
        incoming = parse(raw)
        if incoming.session_id is None and isinstance(item.get("session-id"), str):
            incoming.session_id = item["session-id"]
        sequence = session.broker.send(entity, incoming, len(raw))
        numbers.append(sequence if sequence is not None else 0)
    session.broker.store.commit()
    return Response(200, "OK", {"sequence-numbers": Array(0x81, tuple(numbers))})


def cancel_scheduled_message(session: Requester, entity: Entity, request: Request) -> Response:
    session.broker.cancel_scheduled(entity, _sequence_numbers(request))
    session.broker.store.commit()
    return Response(200, "OK")


def receive_by_sequence_number(session: Requester, entity: Entity, request: Request) -> Response:
    mode = request.field("receiver-settle-mode", int, required=False)
    link_name = _link_name(request)
    owner = session.receiver(link_name)
    found = session.broker.receive_deferred(
        entity,
        _sequence_numbers(request),
        _session_id(request),
        link_name,
        owner,
        receive_and_delete=mode == 0,
    )
    messages = []
    for message, token, locked_until in found:
        item: dict[str, Any] = {
            "message": message.encode(locked_until=locked_until if token else None)
        }
        if token is not None:
            item["lock-token"] = token
        messages.append(item)
    return Response(200, "OK", {"messages": messages})


def update_disposition(session: Requester, entity: Entity, request: Request) -> Response:
    status = request.field("disposition-status", str)
    sid = _session_id(request)
    changes = properties_to_modify(request.field("properties-to-modify", dict, required=False))
    broker = session.broker
    for token in _tokens(request):
        if status == "completed":
            broker.complete(token, sid)
        elif status == "abandoned":
            broker.abandon(token, sid, changes)
        elif status in ("defered", "deferred"):
            broker.defer(token, sid, changes)
        elif status == "suspended":
            broker.dead_letter(
                token,
                request.field("deadletter-reason", str, required=False),
                request.field("deadletter-description", str, required=False),
                sid,
                changes,
            )
        else:
            raise BrokerError(f"Unknown disposition-status {status!r}.")
    broker.pump(entity)
    return Response(200, "OK")


def get_message_sessions(session: Requester, entity: Entity, request: Request) -> Response:
    skip = request.field("skip", int, required=False) or 0
    top = request.field("top", int, required=False) or 100
    if not entity.requires_session:
        raise BrokerError(f"The entity '{entity.name}' does not require sessions.")
    ids = session.broker.sessions.session_ids(entity)[skip : skip + top]
    if not ids:
        return Response(204, "No sessions")
    return Response(
        200, "OK", {"skip": Int(skip + len(ids)), "sessions-ids": Array(0xB1, tuple(ids))}
    )


_OPERATIONS = {
    "renew-lock": renew_lock,
    "renew-session-lock": renew_session_lock,
    "get-session-state": get_session_state,
    "set-session-state": set_session_state,
    "peek-message": peek_message,
    "schedule-message": schedule_message,
    "cancel-scheduled-message": cancel_scheduled_message,
    "receive-by-sequence-number": receive_by_sequence_number,
    "update-disposition": update_disposition,
    "get-message-sessions": get_message_sessions,
}

__all__ = ["NO_FILTER", "InvalidMessage", "Long", "MessageNotFound"]
