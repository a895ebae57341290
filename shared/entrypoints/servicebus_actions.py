"""Adapt the Functions Service Bus SDK-type binding to the processor's ``SessionActions`` port.

The binding gives the user function an ``azure.servicebus.ServiceBusReceivedMessage`` (built
from the raw AMQP message) and a ``ServiceBusMessageActions`` that settles through the host's
gRPC Settlement service. Everything here is about that translation; no decisions are made.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime
from typing import ParamSpec, TypeVar

from azure.servicebus import ServiceBusReceivedMessage
from azurefunctions.extensions.bindings.servicebus import ServiceBusMessageActions

from ..adapters.servicebus_bindings import SettlementError, get_session_state
from ..domain.envelope import body_bytes, plain_properties
from ..domain.errors import SERVICE_BUS, ServiceUnavailable
from ..service_layer.session_messages import IncomingMessage

P = ParamSpec("P")
R = TypeVar("R")


def settlement(method: Callable[P, R]) -> Callable[P, R]:
    """The method's ``SettlementError`` as ``ServiceUnavailable`` for Service Bus."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except SettlementError as error:
            raise ServiceUnavailable(SERVICE_BUS, f"{error.method}: {error.details}") from error

    return wrapper


class FunctionSessionActions:
    """The ``SessionActions`` port over one received message and the host's settlement client.

    A settlement, state or lock request that fails (the extension's ``SettlementError``:
    Service Bus out of reach, or the session's lock lost) raises ``ServiceUnavailable`` for
    Service Bus: the function then fails, and the host releases the lock, so the message is
    redelivered (the processor is safe to re-run).
    """

    def __init__(self, actions: ServiceBusMessageActions, message: ServiceBusReceivedMessage):
        if not message.session_id:
            raise ValueError("The message has no session id: is the queue session-enabled?")
        self._actions = actions
        self._message = message
        self._session_id: str = message.session_id

    @settlement
    def get_state(self) -> bytes | None:
        # The binding has no public getter: servicebus_bindings owns the workaround.
        state = get_session_state(self._actions, self._session_id)
        return state or None  # the host returns b"" for "no state"

    @settlement
    def set_state(self, state: bytes | None) -> None:
        # The settlement service has no "delete": an empty state is how a session is cleared.
        self._actions.set_session_state(self._session_id, state or b"")

    @settlement
    def complete(self) -> None:
        self._actions.complete(self._message)

    @settlement
    def abandon(self) -> None:
        self._actions.abandon(self._message)

    @settlement
    def dead_letter(self, reason: str, description: str) -> None:
        self._actions.deadletter(
            self._message, deadletter_reason=reason, deadletter_error_description=description
        )

    @settlement
    def release_session(self) -> None:
        self._actions.release_session(self._session_id)

    @settlement
    def renew_lock(self) -> datetime | None:
        try:
            locked_until = self._actions.renew_session_lock(self._session_id)
        except RuntimeError:  # renewed, but the host did not say until when
            return None
        return locked_until.ToDatetime(tzinfo=UTC) if locked_until.seconds else None


def incoming_message(message: ServiceBusReceivedMessage) -> IncomingMessage:
    """What the processor needs from the SDK message. ``delivery_count`` is passed on as it
    is: the AMQP header's count of earlier deliveries, or None where the binding does not
    carry the header (the processor counts attempts itself)."""
    return IncomingMessage(
        body=body_bytes(message.body),
        session_id=message.session_id or "",
        delivery_count=message.delivery_count,
        message_id=str(message.message_id) if message.message_id is not None else None,
        application_properties=plain_properties(message.application_properties),
    )
