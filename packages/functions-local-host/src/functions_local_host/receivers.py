"""A Service Bus receiver of the host, as the threads outside its event loop use it.

The host receives with ``azure.servicebus.aio`` on one event loop per trigger; functions run on
other threads, and so do the Settlement service's gRPC handlers. ``LoopReceiver`` gives them
the settlement, lock and session-state calls of one receiver as blocking calls: each one runs
on the receiver's loop and its result (or the SDK's exception) comes back to the caller.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime
from collections.abc import Coroutine, Sequence
from typing import Any, Literal, Protocol, TypeVar

from azure.servicebus import ServiceBusReceivedMessage
from azure.servicebus.aio import ServiceBusReceiver
from azure.servicebus.exceptions import ServiceBusError

T = TypeVar("T")
Settlement = Literal["complete_message", "abandon_message"]


class BlockingSession(Protocol):
    """The session calls the Settlement service makes: a sync SDK ``ServiceBusSession`` or a
    ``LoopSession``."""

    @property
    def session_id(self) -> str: ...

    @property
    def locked_until_utc(self) -> datetime.datetime | None: ...

    def get_state(self) -> bytes | None: ...

    def set_state(self, state: bytes | None) -> None: ...

    def renew_lock(self) -> datetime.datetime: ...


class BlockingReceiver(Protocol):
    """The settlement calls the Settlement service makes on the receiver holding a lock: a
    sync SDK ``ServiceBusReceiver`` or a ``LoopReceiver``."""

    @property
    def session(self) -> BlockingSession: ...

    def complete_message(self, message: ServiceBusReceivedMessage) -> None: ...

    def abandon_message(self, message: ServiceBusReceivedMessage) -> None: ...

    def defer_message(self, message: ServiceBusReceivedMessage) -> None: ...

    def dead_letter_message(
        self,
        message: ServiceBusReceivedMessage,
        reason: str | None = None,
        error_description: str | None = None,
    ) -> None: ...

    def renew_message_lock(self, message: ServiceBusReceivedMessage) -> datetime.datetime: ...


class LoopReceiver:
    """Blocking calls into ``receiver``, which lives on ``loop``. Never call it from ``loop``'s
    own thread (it would wait for itself): that raises ``RuntimeError``."""

    def __init__(self, receiver: ServiceBusReceiver, loop: asyncio.AbstractEventLoop) -> None:
        self._receiver = receiver
        self._loop = loop
        self.session = LoopSession(self)

    def run(self, operation: Coroutine[Any, Any, T]) -> T:
        if _running_loop() is self._loop:
            operation.close()
            raise RuntimeError("LoopReceiver is for threads other than its event loop's")
        if not self._loop.is_running():
            operation.close()
            raise ServiceBusError("The receiver is closed: its trigger has stopped.")
        try:
            future = asyncio.run_coroutine_threadsafe(operation, self._loop)
        except RuntimeError as error:  # the loop is closed: the trigger has stopped
            operation.close()
            raise ServiceBusError(f"The receiver is closed: {error}") from error
        while True:
            # The SDK bounds the operation; a loop that stops first never runs it.
            try:
                return future.result(timeout=1.0)
            except concurrent.futures.TimeoutError:
                if not self._loop.is_running():
                    future.cancel()
                    raise ServiceBusError(
                        "The receiver is closed: its trigger has stopped."
                    ) from None

    @property
    def aio(self) -> ServiceBusReceiver:
        return self._receiver

    def complete_message(self, message: ServiceBusReceivedMessage) -> None:
        self.run(self._receiver.complete_message(message))

    def abandon_message(self, message: ServiceBusReceivedMessage) -> None:
        self.run(self._receiver.abandon_message(message))

    def defer_message(self, message: ServiceBusReceivedMessage) -> None:
        self.run(self._receiver.defer_message(message))

    def dead_letter_message(
        self,
        message: ServiceBusReceivedMessage,
        reason: str | None = None,
        error_description: str | None = None,
    ) -> None:
        self.run(
            self._receiver.dead_letter_message(
                message, reason=reason, error_description=error_description
            )
        )

    def renew_message_lock(self, message: ServiceBusReceivedMessage) -> datetime.datetime:
        return self.run(self._receiver.renew_message_lock(message))

    def settle_all(
        self, operation: Settlement, messages: Sequence[ServiceBusReceivedMessage]
    ) -> list[ServiceBusError | None]:
        """Complete (or abandon) each message, all at once on the loop: each message's SDK
        error, or None once it is settled. Raises ``ServiceBusError`` when the receiver is
        closed."""

        async def all_at_once() -> list[Any]:
            settle = getattr(self._receiver, operation)
            return await asyncio.gather(*(settle(m) for m in messages), return_exceptions=True)

        outcomes = self.run(all_at_once())
        for outcome in outcomes:
            if isinstance(outcome, BaseException) and not isinstance(outcome, ServiceBusError):
                raise outcome
        return [outcome if isinstance(outcome, ServiceBusError) else None for outcome in outcomes]


class LoopSession:
    """The session of a ``LoopReceiver``'s session receiver: state and lock, blocking."""

    def __init__(self, receiver: LoopReceiver) -> None:
        self._receiver = receiver

    @property
    def session_id(self) -> str:
        return str(self._receiver.aio.session.session_id)

    @property
    def locked_until_utc(self) -> datetime.datetime | None:
        # Written by the loop on each renewal; reading it from another thread is one attribute
        # read.
        return self._receiver.aio.session.locked_until_utc

    def get_state(self) -> bytes | None:
        state: bytes | None = self._receiver.run(self._receiver.aio.session.get_state())
        return state

    def set_state(self, state: bytes | None) -> None:
        self._receiver.run(self._receiver.aio.session.set_state(state))

    def renew_lock(self) -> datetime.datetime:
        return self._receiver.run(self._receiver.aio.session.renew_lock())


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
