"""The failures Service Bus reports with an AMQP condition; the SDK maps the condition (not the
status) to its exceptions, so each error carries both."""

from __future__ import annotations


class BrokerError(Exception):
    """A failure Service Bus reports with an AMQP condition (the SDK maps it to an exception).
    Raised as it is, it is an argument error; each subclass names its own condition and the
    status a management response carries with it (both required)."""

    condition = "com.microsoft:argument-error"
    status = 400

    def __init_subclass__(cls, *, condition: str, status: int) -> None:
        super().__init_subclass__()
        cls.condition, cls.status = condition, status

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


class EntityNotFound(BrokerError, condition="amqp:not-found", status=404): ...


class MessageLockLost(BrokerError, condition="com.microsoft:message-lock-lost", status=410): ...


class SessionLockLost(BrokerError, condition="com.microsoft:session-lock-lost", status=410): ...


class SessionCannotBeLocked(
    BrokerError, condition="com.microsoft:session-cannot-be-locked", status=409
): ...


class MessageNotFound(BrokerError, condition="com.microsoft:message-not-found", status=404): ...


class MessageTooLarge(BrokerError, condition="amqp:link:message-size-exceeded", status=413): ...


class NotAllowed(BrokerError, condition="amqp:not-allowed", status=400): ...
