"""The host's Settlement gRPC service: what ``ServiceBusMessageActions`` talks to.

The real Python worker's ``ServiceBusMessageActions`` sends each settlement to the Functions
host over gRPC; the host settles with the receiver that holds the lock. Here the host keeps a
registry of the messages and sessions its receivers hold right now, and each call is carried
out by that receiver (a ``LoopReceiver`` runs the call on the receiver's event loop). An error
from the SDK goes back as a gRPC error (with the SDK's exception name in the details), so the
function sees ``SettlementError`` as it would in Azure.
"""

from __future__ import annotations

import datetime
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from azure.servicebus import ServiceBusReceivedMessage
from azure.servicebus.exceptions import (
    MessageAlreadySettled,
    MessageLockLostError,
    ServiceBusError,
    SessionLockLostError,
)
from azurefunctions.extensions.bindings.protos import settlement_pb2, settlement_pb2_grpc
from azurefunctions.extensions.bindings.servicebus import ServiceBusMessageActions
from google.protobuf.empty_pb2 import Empty
from google.protobuf.timestamp_pb2 import Timestamp

from .message_actions import settlement_actions
from .receivers import BlockingReceiver

logger = logging.getLogger("functions_local_host")


@dataclass
class HeldSession:
    """A session the host has accepted; ``release_requested`` is set by ReleaseSession and
    honoured once the current invocation ends (as the real host does).

    The session's state is known to the host once it has read or written it: only the holder
    of the session lock can set it, and this host holds it until it lets the session go. So a
    GetSessionState after the first is answered from ``known_state`` (a one-tuple) without a
    round trip to the broker, as long as the lock has not expired by the clock (the SDK's own
    check before it asks the broker); a failed write forgets it."""

    session_id: str
    receiver: BlockingReceiver
    lock: threading.RLock = field(default_factory=threading.RLock)
    release_requested: bool = False
    known_state: tuple[bytes | None] | None = None
    # Invocations of this session's messages running now (changed under the registry's guard).
    invocations: int = 0

    def state(self, read: Callable[[], bytes | None]) -> bytes | None:
        """The session state: ``known_state`` while the lock holds, else ``read()``."""
        with self.lock:
            if self.known_state is None or self.lock_expired():
                self.known_state = (read(),)
            return self.known_state[0]

    def write_state(self, state: bytes | None, write: Callable[[bytes | None], None]) -> None:
        with self.lock:
            self.known_state = None  # a write that fails may or may not have reached the broker
            write(state)
            self.known_state = (state,)

    def lock_expired(self) -> bool:
        """The session's lock has run out by the clock (or was never known)."""
        locked_until = self.receiver.session.locked_until_utc
        return locked_until is None or locked_until <= datetime.datetime.now(datetime.UTC)


@dataclass
class HeldMessage:
    """A received message whose lock the host holds until it is settled."""

    message: ServiceBusReceivedMessage
    receiver: BlockingReceiver
    lock: threading.RLock
    session: HeldSession | None = None
    settled: bool = False

    @property
    def lock_token(self) -> str:
        return str(self.message.lock_token)


class SettlementRegistry:
    """Lock tokens and session ids the host holds right now, and what holds them.

    A message's settlement goes to the receiver that delivered it (its lock token is its own).
    A session is known by its id alone, so one id names one holder: a slot that accepts a
    session another slot of this host still holds (its lock lost while an invocation of it
    runs) waits until that holder lets go (``try_hold_session``). Meanwhile a state write or a
    renewal for that id goes to the stale holder, whose lock is lost, and fails with
    SessionLockLost, as it would for its invocation in Azure; the new holder's invocations start
    after. (The extension's ``SessionActionsCache`` also keeps the first holder of an id:
    ``TryAdd`` does not replace one.)"""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._messages: dict[str, HeldMessage] = {}
        self._sessions: dict[str, HeldSession] = {}

    def hold_message(self, held: HeldMessage) -> None:
        with self._guard:
            self._messages[held.lock_token] = held

    def drop_message(self, held: HeldMessage) -> None:
        with self._guard:
            self._messages.pop(held.lock_token, None)

    def hold_session(self, held: HeldSession) -> None:
        with self._guard:
            self._sessions[held.session_id] = held

    def try_hold_session(self, held: HeldSession) -> bool:
        """Register ``held`` unless another holder of its id still counts: one with an
        invocation running or a lock not yet run out by the clock. A holder that counts no
        more is replaced. False: try again later."""
        with self._guard:
            other = self._sessions.get(held.session_id)
            if (
                other is not None
                and other is not held
                and (other.invocations or not other.lock_expired())
            ):
                return False
            self._sessions[held.session_id] = held
            return True

    def invoking(self, held: HeldSession, change: int) -> None:
        """Count an invocation of ``held``'s messages in (+1) or out (-1)."""
        with self._guard:
            held.invocations += change

    def drop_session(self, held: HeldSession) -> None:
        with self._guard:
            if self._sessions.get(held.session_id) is held:
                del self._sessions[held.session_id]

    def message(self, lock_token: str, context: grpc.ServicerContext) -> HeldMessage:
        with self._guard:
            held = self._messages.get(lock_token)
        if held is None:
            context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"No message with lock token {lock_token} is held by this host (it was settled "
                "already, or its lock expired).",
            )
            raise AssertionError("unreachable: abort raises")
        return held

    def session(self, session_id: str, context: grpc.ServicerContext) -> HeldSession:
        with self._guard:
            held = self._sessions.get(session_id)
        if held is None:
            context.abort(
                grpc.StatusCode.NOT_FOUND, f"Session {session_id!r} is not held by this host."
            )
            raise AssertionError("unreachable: abort raises")
        return held


class SettlementServicer(settlement_pb2_grpc.SettlementServicer):
    def __init__(self, registry: SettlementRegistry) -> None:
        self._registry = registry

    def Complete(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._settle(request.locktoken, context, "complete_message")
        return _empty()

    def Abandon(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._settle(request.locktoken, context, "abandon_message")
        return _empty()

    def Deadletter(self, request: Any, context: grpc.ServicerContext) -> Any:
        kwargs = {}
        if request.HasField("deadletterReason"):
            kwargs["reason"] = request.deadletterReason.value
        if request.HasField("deadletterErrorDescription"):
            kwargs["error_description"] = request.deadletterErrorDescription.value
        self._settle(request.locktoken, context, "dead_letter_message", **kwargs)
        return _empty()

    def Defer(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._settle(request.locktoken, context, "defer_message")
        return _empty()

    def RenewMessageLock(self, request: Any, context: grpc.ServicerContext) -> Any:
        held = self._registry.message(request.locktoken, context)
        with held.lock:
            _call(context, held.receiver.renew_message_lock, held.message)
        return _empty()

    def GetSessionState(self, request: Any, context: grpc.ServicerContext) -> Any:
        held = self._registry.session(request.sessionId, context)
        state = held.state(lambda: _call(context, held.receiver.session.get_state))
        return settlement_pb2.GetSessionStateResponse(sessionState=bytes(state or b""))

    def SetSessionState(self, request: Any, context: grpc.ServicerContext) -> Any:
        held = self._registry.session(request.sessionId, context)
        # Empty bytes clear the state, as the host's SetSessionStateAsync(null) does.
        state = bytes(request.sessionState) or None
        held.write_state(
            state, lambda value: _call(context, held.receiver.session.set_state, value)
        )
        return _empty()

    def ReleaseSession(self, request: Any, context: grpc.ServicerContext) -> Any:
        held = self._registry.session(request.sessionId, context)
        held.release_requested = True
        return _empty()

    def RenewSessionLock(self, request: Any, context: grpc.ServicerContext) -> Any:
        held = self._registry.session(request.sessionId, context)
        with held.lock:
            locked_until = _call(context, held.receiver.session.renew_lock)
        timestamp = Timestamp()
        timestamp.FromDatetime(locked_until)
        return settlement_pb2.RenewSessionLockResponse(lockedUntil=timestamp)

    def _settle(
        self, lock_token: str, context: grpc.ServicerContext, operation: str, **kwargs: Any
    ) -> None:
        held = self._registry.message(lock_token, context)
        with held.lock:
            if held.settled:
                context.abort(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"MessageAlreadySettled: message {lock_token} was settled already.",
                )
            _call(context, getattr(held.receiver, operation), held.message, **kwargs)
            held.settled = True
        # It stays registered until the invocation ends, so a second settlement fails with
        # MessageAlreadySettled as the SDK's would.


def _call(context: grpc.ServicerContext, operation: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return operation(*args, **kwargs)
    except MessageAlreadySettled as error:
        context.abort(grpc.StatusCode.FAILED_PRECONDITION, _details(error))
    except (MessageLockLostError, SessionLockLostError) as error:
        context.abort(grpc.StatusCode.ABORTED, _details(error))
    except (ServiceBusError, TypeError, ValueError) as error:
        context.abort(grpc.StatusCode.INTERNAL, _details(error))


def _details(error: Exception) -> str:
    return f"{type(error).__name__}: {error}"


def _empty() -> Empty:
    return Empty()


class SettlementServer:
    """The host's gRPC server on 127.0.0.1 (a free port): the Settlement service, the
    ``FunctionRpc`` event streams of worker processes when ``handlers`` carries them (one
    server for both, as the Functions host's), and the ``ServiceBusMessageActions`` that
    functions get, wired to it."""

    def __init__(
        self,
        registry: SettlementRegistry,
        *,
        host: str = "127.0.0.1",
        handlers: Sequence[grpc.GenericRpcHandler] = (),
    ) -> None:
        self.registry = registry
        # Worker processes' event streams (``handlers``) each hold a thread of the pool.
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=32 + 16))
        settlement_pb2_grpc.add_SettlementServicer_to_server(
            SettlementServicer(registry), self._server
        )
        if handlers:
            self._server.add_generic_rpc_handlers(tuple(handlers))
        self.port = self._server.add_insecure_port(f"{host}:0")
        self.address = f"{host}:{self.port}"
        self._channel: grpc.Channel | None = None

    def start(self) -> None:
        self._server.start()
        self._channel = grpc.insecure_channel(self.address)

    def stop(self, grace: float = 2.0) -> None:
        if self._channel is not None:
            self._channel.close()
        self._server.stop(grace).wait(grace + 1)

    def message_actions(self) -> ServiceBusMessageActions:
        """A real ``ServiceBusMessageActions`` talking to this server. Its ``__init__`` reads
        the worker's --host/--port from sys.argv, so it is built without it."""
        if self._channel is None:
            raise RuntimeError("start the settlement server first")
        return settlement_actions(self._channel, self.address)
