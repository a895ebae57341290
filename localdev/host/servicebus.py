"""Service Bus queue triggers: session-enabled (one message at a time per session, in order,
up to maxConcurrentSessions sessions) and plain (up to maxConcurrentCalls at once).

The host settles as the Functions host does: with autoCompleteMessages (host.json, overridden
by the function's own setting) it completes after a successful invocation; it abandons after a
failed one; a message the function settled itself through ``ServiceBusMessageActions`` is left
alone. Locks are renewed with ``AutoLockRenewer`` up to maxAutoLockRenewalDuration, and a plain
message's only while its invocation runs.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from azure.servicebus import (
    NEXT_AVAILABLE_SESSION,
    AutoLockRenewer,
    ServiceBusClient,
    ServiceBusReceivedMessage,
    ServiceBusReceiver,
)
from azure.servicebus.exceptions import OperationTimeoutError, ServiceBusError

from .config import ServiceBusOptions
from .functions import FunctionSpec
from .servicebus_binding import invoke_with_message
from .settlement import HeldMessage, HeldSession, SettlementServer

logger = logging.getLogger("localdev.host")

# How long one wait for a session or a message blocks: it bounds how long a stop takes.
_POLL_SECONDS = 1.0


class ServiceBusListener:
    def __init__(
        self,
        spec: FunctionSpec,
        *,
        connection_string: str,
        options: ServiceBusOptions,
        settlement: SettlementServer,
    ) -> None:
        self.spec = spec
        self.queue_name = str(spec.setting("queueName") or spec.setting("topicName"))
        self._subscription = spec.setting("subscriptionName")
        self.sessions = bool(spec.setting("isSessionsEnabled", False))
        own = spec.setting("autoCompleteMessages")
        self.auto_complete = options.auto_complete_messages if own is None else bool(own)
        self._options = options
        self._settlement = settlement
        self._client = ServiceBusClient.from_connection_string(connection_string)
        # Accepting the next session: the SDK treats "no session within max_wait_time" as a
        # retryable timeout and tries 3 more times with backoff (~19 s for a 1 s wait), during
        # which no accept is pending. The worker loop is the retry here, as in the host.
        self._session_client = ServiceBusClient.from_connection_string(
            connection_string, retry_total=0
        )
        self._renewer = AutoLockRenewer(
            max_lock_renewal_duration=options.max_auto_lock_renewal_duration
        )
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        workers = (
            self._options.max_concurrent_sessions
            if self.sessions
            else self._options.max_concurrent_calls
        )
        target = self._session_worker if self.sessions else self._message_worker
        for number in range(workers):
            thread = threading.Thread(target=target, name=f"{self.spec.name}-{number}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float) -> None:
        """Stop taking messages, let the invocations in flight finish (up to ``timeout``), then
        close the receivers and the client."""
        self._stopping.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._renewer.close()
        self._session_client.close()
        self._client.close()

    # -- sessions ---------------------------------------------------------------------------

    def _receiver(self, **kwargs: Any) -> ServiceBusReceiver:
        client = self._session_client if self.sessions else self._client
        if self._subscription:
            return client.get_subscription_receiver(
                self.queue_name, str(self._subscription), **kwargs
            )
        return client.get_queue_receiver(self.queue_name, **kwargs)

    def _session_worker(self) -> None:
        while not self._stopping.is_set():
            receiver = self._receiver(
                session_id=NEXT_AVAILABLE_SESSION, max_wait_time=_POLL_SECONDS
            )
            try:
                receiver.__enter__()
            except OperationTimeoutError:
                receiver.close()
                continue  # no session has messages now
            except ServiceBusError as error:
                receiver.close()
                if not self._stopping.is_set():
                    logger.warning("%s: cannot accept a session: %s", self.spec.name, error)
                    self._stopping.wait(_POLL_SECONDS)
                continue
            session = HeldSession(str(receiver.session.session_id), receiver)
            self._settlement.registry.hold_session(session)
            try:
                self._drain_session(session)
            except ServiceBusError as error:
                logger.warning(
                    "%s: session %s ended: %s", self.spec.name, session.session_id, error
                )
            finally:
                self._settlement.registry.drop_session(session)
                receiver.close()

    def _drain_session(self, session: HeldSession) -> None:
        """Messages of one session, one at a time, until it is idle for sessionIdleTimeout,
        the function releases it, or the host stops."""
        idle_until = time.monotonic() + self._options.session_idle_timeout
        renewing_since = self._renew_session(session)
        while not self._stopping.is_set():
            wait = min(_POLL_SECONDS, max(0.05, idle_until - time.monotonic()))
            with session.lock:
                messages = session.receiver.receive_messages(
                    max_message_count=1, max_wait_time=wait
                )
            if not messages:
                if time.monotonic() >= idle_until:
                    return  # idle: release it, another session may be waiting
                continue
            # maxAutoLockRenewalDuration bounds the renewal for one message, as in the host,
            # not for the whole life of a busy session.
            if time.monotonic() - renewing_since > self._options.max_auto_lock_renewal_duration / 2:
                renewing_since = self._renew_session(session)
            self._process(messages[0], session.receiver, session)
            if session.release_requested:
                return
            idle_until = time.monotonic() + self._options.session_idle_timeout

    def _renew_session(self, session: HeldSession) -> float:
        self._renewer.register(
            session.receiver,
            session.receiver.session,
            max_lock_renewal_duration=self._options.max_auto_lock_renewal_duration,
        )
        return time.monotonic()

    # -- plain queues -----------------------------------------------------------------------

    def _message_worker(self) -> None:
        with self._receiver(max_wait_time=_POLL_SECONDS) as receiver:
            while not self._stopping.is_set():
                try:
                    messages = receiver.receive_messages(
                        max_message_count=1, max_wait_time=_POLL_SECONDS
                    )
                except ServiceBusError as error:
                    logger.warning("%s: receive failed: %s", self.spec.name, error)
                    self._stopping.wait(_POLL_SECONDS)
                    continue
                for message in messages:
                    # A renewer per message, closed when the invocation ends: a message the
                    # function left unsettled (autoCompleteMessages false) must not keep its
                    # lock for maxAutoLockRenewalDuration; it comes back when its lock runs out,
                    # as with the Functions host. The SDK has no way to unregister one message.
                    renewer = AutoLockRenewer(
                        max_lock_renewal_duration=self._options.max_auto_lock_renewal_duration
                    )
                    try:
                        renewer.register(receiver, message)
                        self._process(message, receiver, None)
                    finally:
                        renewer.close(wait=False)

    # -- one message ------------------------------------------------------------------------

    def _process(
        self,
        message: ServiceBusReceivedMessage,
        receiver: ServiceBusReceiver,
        session: HeldSession | None,
    ) -> None:
        held = HeldMessage(
            message=message,
            receiver=receiver,
            lock=session.lock if session else threading.RLock(),
            session=session,
        )
        registry = self._settlement.registry
        registry.hold_message(held)
        try:
            succeeded = invoke_with_message(self.spec, message, entity=self.queue_name).succeeded
            with held.lock:
                if held.settled:
                    return
                if succeeded and not self.auto_complete:
                    return  # the function owns settlement; the lock will run out if it forgot
                operation = receiver.complete_message if succeeded else receiver.abandon_message
                try:
                    operation(message)
                    held.settled = True
                except ServiceBusError as error:
                    logger.warning(
                        "%s: %s of message %s failed: %s",
                        self.spec.name,
                        "Completion" if succeeded else "Abandon",
                        message.message_id,
                        error,
                    )
        finally:
            registry.drop_message(held)
