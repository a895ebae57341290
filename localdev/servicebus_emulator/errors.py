"""The failures Service Bus reports with an AMQP condition; the SDK maps the condition (not the
status) to its exceptions, so each error carries both."""

from __future__ import annotations


class BrokerError(Exception):
    """A failure Service Bus reports with an AMQP condition (the SDK maps it to an exception)."""

    condition = "com.microsoft:argument-error"
    status = 400

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


class EntityNotFound(BrokerError):
    condition, status = "amqp:not-found", 404


class MessageLockLost(BrokerError):
    condition, status = "com.microsoft:message-lock-lost", 410


class SessionLockLost(BrokerError):
    condition, status = "com.microsoft:session-lock-lost", 410


class SessionCannotBeLocked(BrokerError):
    condition, status = "com.microsoft:session-cannot-be-locked", 409


class MessageNotFound(BrokerError):
    condition, status = "com.microsoft:message-not-found", 404


class MessageTooLarge(BrokerError):
    condition, status = "amqp:link:message-size-exceeded", 413


class NotAllowed(BrokerError):
    condition, status = "amqp:not-allowed", 400
