"""Service Bus queue triggers: session-enabled (one message at a time per session, in order,
up to maxConcurrentSessions sessions) and plain (up to maxConcurrentCalls at once).

Each trigger receives with ``azure.servicebus.aio`` on an event loop of its own (one thread),
and runs the function on a pool of maxConcurrentSessions (or maxConcurrentCalls) threads.
A session slot waits for the next session at the broker, so a session is taken as soon as it
has messages; when the slot lets a session go (the function released it, it was idle for
sessionIdleTimeout, or its lock was lost) the receiver's close runs in the background and the
slot waits for the next session at once. Opening and closing a session receiver is the SDK's
slowest step (it polls the handshake in 50 ms steps and waits up to a second for its keep-alive
task on close): the slot pays the open only, and never more than one session is held per slot,
because the close sends the detach that lets the session go before anything else it does,
while the next session's attach can only follow a whole new connection's handshake.

The host settles as the Functions host does: with autoCompleteMessages (host.json, overridden
by the function's own setting) it completes after a successful invocation; it abandons after a
failed one; a message the function settled itself through ``ServiceBusMessageActions`` is left
alone. For a trigger of one message at a time the host keeps each lock (a session's; a plain
message's while its invocation runs) by renewing it halfway to its expiry, up to
maxAutoLockRenewalDuration from the latest message. A batch trigger's locks are not renewed, as
in the extension's batch receive loop: its function may renew them itself
(``renew_session_lock``, ``renew_message_lock``).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import functools
import logging
import ssl
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import certifi
from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusReceivedMessage
from azure.servicebus.aio import ServiceBusClient, ServiceBusReceiver
from azure.servicebus.exceptions import (
    OperationTimeoutError,
    ServiceBusCommunicationError,
    ServiceBusConnectionError,
    ServiceBusError,
)

from .config import ServiceBusOptions
from .functions import FunctionSpec
from .receivers import BlockingReceiver, LoopReceiver, Settlement
from .servicebus_binding import invoke_with_message, invoke_with_messages, is_batch
from .settlement import HeldMessage, HeldSession, SettlementServer

logger = logging.getLogger("functions_local_host")

T = TypeVar("T")

# How long one wait for a session or a message lasts at the broker; a stop does not wait for it.
_WAIT_SECONDS = 60.0
# After a failed accept or receive, the next try comes this much later.
_RETRY_SECONDS = 1.0
# Service Bus unreachable for this long is logged (once per outage); shorter outages, such as
# the broker stopping just before the host on Ctrl-C, are not.
_OUTAGE_GRACE_SECONDS = 3.0
# What closing the receivers may add to a stop, beyond the drain timeout.
_CLOSE_SECONDS = 5.0
# How often a slot looks whether the stale holder of the session it accepted has let go.
_HANDOVER_POLL_SECONDS = 0.05


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
        self.batch = is_batch(spec)
        own = spec.setting("autoCompleteMessages")
        self.auto_complete = options.auto_complete_messages if own is None else bool(own)
        # One TLS context for every connection of the trigger: without it the SDK builds one
        # per connection, loading the CA bundle each time (most of a session receiver's CPU),
        # even for the emulator, which it reaches without TLS.
        tls = ssl.create_default_context(cafile=certifi.where())
        # Accepting the next session: the SDK treats "no session within max_wait_time" as a
        # retryable timeout and tries again with backoff, during which no accept is pending.
        # The slot's loop is the retry here, as in the host.
        self._client = (
            ServiceBusClient.from_connection_string(
                connection_string, retry_total=0, ssl_context=tls
            )
            if self.sessions
            else ServiceBusClient.from_connection_string(connection_string, ssl_context=tls)
        )
        self._options = options
        self._settlement = settlement
        # The extension's batch receive loop runs one batch at a time (one session at a time
        # with sessions): ServiceBusListener.RunBatchReceiveLoopAsync.
        self._workers = (
            1
            if self.batch
            else options.max_concurrent_sessions
            if self.sessions
            else options.max_concurrent_calls
        )
        self._invocations = ThreadPoolExecutor(
            max_workers=self._workers, thread_name_prefix=spec.name
        )
        self._outage = _Outage(spec.name)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        # Set on the loop by stop(): no new session or message is taken once it is done.
        self._stopping: asyncio.Future[None] | None = None
        self._drain_timeout = 0.0
        self._closing: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._thread = threading.Thread(
            target=asyncio.run,
            args=(self._run(),),
            name=f"{self.spec.name}-servicebus",
            daemon=True,
        )
        self._thread.start()
        self._ready.wait()

    def stop(self, timeout: float) -> None:
        """Stop taking messages, let the invocations in flight finish (up to ``timeout``), then
        close the receivers and the client."""
        self._outage.stopping = True
        if self._thread is None:
            return
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has ended already
                loop.call_soon_threadsafe(self._request_stop, timeout)
        self._thread.join(timeout + _CLOSE_SECONDS)
        self._invocations.shutdown(wait=False)

    def _request_stop(self, timeout: float) -> None:
        self._drain_timeout = timeout
        if self._stopping is not None and not self._stopping.done():
            self._stopping.set_result(None)

    async def _run(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = self._loop.create_future()
        client = self._client
        if self.sessions:
            target = self._session_slot
        else:
            target = self._batch_worker if self.batch else self._message_worker
        workers = [asyncio.create_task(target(client)) for _ in range(self._workers)]
        self._ready.set()
        try:
            await self._stopping
            _, running = await asyncio.wait(workers, timeout=max(self._drain_timeout, 0.0))
            for worker in running:  # an invocation outlived the drain timeout
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
        finally:
            # Every receiver is closed by its own task; the client is closed only after them,
            # never while one of them is still closing (two closes of one receiver at once
            # fail inside the SDK).
            closing = set(self._closing)
            if closing:
                _, closing = await asyncio.wait(closing, timeout=_CLOSE_SECONDS)
            if closing:
                logger.debug("%s: %d receivers still closing", self.spec.name, len(closing))
            else:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(client.close(), _CLOSE_SECONDS)

    # -- sessions ---------------------------------------------------------------------------

    def _receiver(self, client: ServiceBusClient, **kwargs: Any) -> ServiceBusReceiver:
        if self._subscription:
            return client.get_subscription_receiver(
                self.queue_name, str(self._subscription), **kwargs
            )
        return client.get_queue_receiver(self.queue_name, **kwargs)

    async def _session_slot(self, client: ServiceBusClient) -> None:
        """One of maxConcurrentSessions: accept a session, drain it, let it go, again."""
        while not self._stopped():
            receiver = self._receiver(
                client, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=_WAIT_SECONDS
            )
            try:
                accepted = await self._unless_stopped(receiver.__aenter__)
            except OperationTimeoutError:
                self._close_later(receiver)
                continue  # no session had messages for a while
            except ServiceBusError as error:
                self._close_later(receiver)
                self._outage.failed(error)
                await self._unless_stopped(lambda: asyncio.sleep(_RETRY_SECONDS))
                continue
            if accepted is None:
                self._close_later(receiver)
                return
            self._outage.recovered()
            await self._hold(receiver)

    async def _hold(self, receiver: ServiceBusReceiver) -> None:
        """Drain an accepted session, then let it go: the close runs in the background."""
        assert self._loop is not None
        blocking = LoopReceiver(receiver, self._loop)
        session = HeldSession(str(receiver.session.session_id), blocking)
        renewing: asyncio.Task[None] | None = None
        try:
            if not self.batch:
                renewal = _Renewal(self._options.max_auto_lock_renewal_duration)
                renewing = asyncio.create_task(
                    renewal.keep(receiver.session.renew_lock, receiver.session.locked_until_utc)
                )
            if not await self._registered(session):
                return  # the host is stopping
            if self.batch:
                # The extension's batch loop takes the session with AcceptNextSessionAsync and
                # nothing renews its lock (maxAutoLockRenewalDuration "only applies for
                # functions that receive a single message at a time"); the function may renew
                # it through RenewSessionLock, which finds the session here.
                await self._drain_session_batches(receiver, session, blocking)
            else:
                await self._drain_session(receiver, session, renewal)
        except (ServiceBusConnectionError, ServiceBusCommunicationError) as error:
            self._outage.failed(error)  # the broker is gone: the accept that follows says more
        except ServiceBusError as error:
            if self._stopped() or self._outage.stopping:
                logger.debug("%s: session %s ended: %s", self.spec.name, session.session_id, error)
            else:
                logger.warning(
                    "%s: session %s ended: %s", self.spec.name, session.session_id, error
                )
        except Exception:
            logger.exception("%s: session %s failed", self.spec.name, session.session_id)
        finally:
            if renewing is not None:
                renewing.cancel()
            self._settlement.registry.drop_session(session)
            self._close_later(receiver)

    async def _registered(self, session: HeldSession) -> bool:
        """Register the session for settlement once no other slot of this host holds it
        (``SettlementRegistry.try_hold_session``); False when the host stops first."""
        registry = self._settlement.registry
        waited = False
        while not registry.try_hold_session(session):
            if not waited:
                waited = True
                logger.info(
                    "%s: session %s waits for an invocation that lost its lock to end",
                    self.spec.name,
                    session.session_id,
                )
            await self._unless_stopped(lambda: asyncio.sleep(_HANDOVER_POLL_SECONDS))
            if self._stopped():
                return False
        return True

    async def _drain_session(
        self, receiver: ServiceBusReceiver, session: HeldSession, renewal: _Renewal
    ) -> None:
        """Messages of one session, one at a time, until it is idle for sessionIdleTimeout,
        the function releases it, or the host stops."""
        idle_until = time.monotonic() + self._options.session_idle_timeout
        while (wait := idle_until - time.monotonic()) > 0:
            messages = await self._unless_stopped(
                lambda: receiver.receive_messages(max_message_count=1, max_wait_time=wait)
            )
            if messages is None:
                return  # the host is stopping
            if not messages:
                continue
            renewal.extend()
            await self._invoke(messages[0], session.receiver, session)
            if session.release_requested:
                return
            idle_until = time.monotonic() + self._options.session_idle_timeout

    async def _drain_session_batches(
        self, receiver: ServiceBusReceiver, session: HeldSession, blocking: LoopReceiver
    ) -> None:
        """Batches of one session (cardinality many), as the extension's batch loop takes
        them: up to maxMessageBatchSize messages per invocation; with minMessageBatchSize
        above 1, messages wait for more until there are that many or maxBatchWaitTime has
        passed since the first of them; when the session is idle for sessionIdleTimeout (or
        the function releases it) what is left is dispatched and the session let go."""
        batches = _Batches(self._options)
        last_message = time.monotonic()
        while (idle := self._options.session_idle_timeout - (time.monotonic() - last_message)) > 0:
            wait = min(idle, batches.wait()) if batches.cached else idle
            received = await self._unless_stopped(
                functools.partial(
                    receiver.receive_messages, max_message_count=batches.room(), max_wait_time=wait
                )
            )
            if received is None:
                return  # the host is stopping: cached messages go back when the session closes
            if received:
                batches.add(received)
                last_message = time.monotonic()
            while (batch := batches.ready()) is not None:
                await self._invoke_batch(batch, blocking, session)
                if session.release_requested:
                    if rest := batches.rest():
                        await self._invoke_batch(rest, blocking, session)
                    return
        if rest := batches.rest():
            await self._invoke_batch(rest, blocking, session)

    # -- plain queues -----------------------------------------------------------------------

    async def _batch_worker(self, client: ServiceBusClient) -> None:
        """A plain queue's batch trigger (cardinality many): one batch at a time, as above.
        The messages' locks are not renewed (the extension's batch loop does not renew them);
        the function may renew each through RenewMessageLock."""
        assert self._loop is not None
        receiver = self._receiver(client, max_wait_time=_WAIT_SECONDS)
        blocking = LoopReceiver(receiver, self._loop)
        batches = _Batches(self._options)
        try:
            while not self._stopped():
                wait = batches.wait() if batches.cached else _WAIT_SECONDS
                try:
                    received = await self._unless_stopped(
                        functools.partial(
                            receiver.receive_messages,
                            max_message_count=batches.room(),
                            max_wait_time=wait,
                        )
                    )
                except ServiceBusError as error:
                    self._outage.failed(error)
                    await self._unless_stopped(lambda: asyncio.sleep(_RETRY_SECONDS))
                    continue
                if received is None:
                    return
                self._outage.recovered()
                batches.add(received)
                while (batch := batches.ready()) is not None:
                    try:
                        await self._invoke_batch(batch, blocking, None)
                    except Exception:
                        logger.exception("%s: a batch of %d messages", self.spec.name, len(batch))
        finally:
            self._close_later(receiver)

    async def _message_worker(self, client: ServiceBusClient) -> None:
        """One of maxConcurrentCalls: receive a message, run the function, again."""
        assert self._loop is not None
        receiver = self._receiver(client, max_wait_time=_WAIT_SECONDS)
        blocking = LoopReceiver(receiver, self._loop)
        try:
            while not self._stopped():
                try:
                    messages = await self._unless_stopped(
                        lambda: receiver.receive_messages(max_message_count=1)
                    )
                except ServiceBusError as error:
                    self._outage.failed(error)
                    await self._unless_stopped(lambda: asyncio.sleep(_RETRY_SECONDS))
                    continue
                if messages is None:
                    return
                self._outage.recovered()
                for message in messages:
                    # The lock is kept only while the invocation runs: a message the function
                    # left unsettled (autoCompleteMessages false) comes back when its lock runs
                    # out, as with the Functions host.
                    renewal = _Renewal(self._options.max_auto_lock_renewal_duration)
                    renewing = asyncio.create_task(
                        renewal.keep(
                            functools.partial(receiver.renew_message_lock, message),
                            message.locked_until_utc,
                        )
                    )
                    try:
                        await self._invoke(message, blocking, None)
                    except Exception:
                        logger.exception("%s: message %s", self.spec.name, message.message_id)
                    finally:
                        renewing.cancel()
        finally:
            self._close_later(receiver)

    # -- the loop's helpers -----------------------------------------------------------------

    def _stopped(self) -> bool:
        return self._stopping is None or self._stopping.done()

    async def _unless_stopped(self, operation: Callable[[], Awaitable[T]]) -> T | None:
        """``await operation()``, or None when the host stops first (the operation is then
        cancelled). Exceptions of the operation are raised."""
        assert self._stopping is not None
        if self._stopping.done():
            return None
        task = asyncio.ensure_future(operation())
        stopping: asyncio.Future[Any] = self._stopping
        await asyncio.wait((task, stopping), return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            return task.result()
        task.cancel()
        await asyncio.wait({task})
        if not task.cancelled():
            task.exception()  # retrieved: an error while stopping is of no interest
        return None

    def _close_later(self, receiver: ServiceBusReceiver) -> None:
        """Close in the background: the detach that lets the session go is sent at once; the
        rest of the close (up to a second in the SDK) does not hold the slot."""

        async def close() -> None:
            try:
                await receiver.close()
            except Exception as error:  # the connection is gone already
                logger.debug("%s: closing a receiver: %r", self.spec.name, error)

        task = asyncio.create_task(close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _invoke(
        self,
        message: ServiceBusReceivedMessage,
        receiver: BlockingReceiver,
        session: HeldSession | None,
    ) -> None:
        """Run the function on an invocation thread; this slot waits for it."""
        assert self._loop is not None
        await self._loop.run_in_executor(
            self._invocations, self._process, message, receiver, session
        )

    async def _invoke_batch(
        self,
        batch: list[ServiceBusReceivedMessage],
        receiver: LoopReceiver,
        session: HeldSession | None,
    ) -> None:
        assert self._loop is not None
        await self._loop.run_in_executor(
            self._invocations, self._process_batch, batch, receiver, session
        )

    # -- one message (on an invocation thread) ----------------------------------------------

    def _process(
        self,
        message: ServiceBusReceivedMessage,
        receiver: BlockingReceiver,
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
        if session is not None:
            registry.invoking(session, +1)
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
            if session is not None:
                registry.invoking(session, -1)

    def _process_batch(
        self,
        batch: list[ServiceBusReceivedMessage],
        receiver: LoopReceiver,
        session: HeldSession | None,
    ) -> None:
        """Run a batch trigger, then settle each message the function left unsettled, all at
        once: completed after a success (autoCompleteMessages), abandoned after a failure
        (TriggerAndCompleteMessagesInternal, which awaits them together with Task.WhenAll)."""
        # Each message has a lock of its own: the function may settle a batch's messages at
        # once, each a round trip to the broker.
        held = [
            HeldMessage(message=message, receiver=receiver, lock=threading.RLock(), session=session)
            for message in batch
        ]
        registry = self._settlement.registry
        for each in held:
            registry.hold_message(each)
        if session is not None:
            registry.invoking(session, +1)
        try:
            outcome = invoke_with_messages(self.spec, batch, entity=self.queue_name)
            if outcome.succeeded and not self.auto_complete:
                return
            with contextlib.ExitStack() as locks:
                for each in held:
                    locks.enter_context(each.lock)
                unsettled = [each for each in held if not each.settled]
                operation: Settlement = (
                    "complete_message" if outcome.succeeded else "abandon_message"
                )
                errors: list[ServiceBusError | None]
                try:
                    errors = receiver.settle_all(operation, [each.message for each in unsettled])
                except ServiceBusError as closed:
                    errors = [closed] * len(unsettled)
                for each, failure in zip(unsettled, errors, strict=True):
                    if failure is None:
                        each.settled = True
                        continue
                    logger.warning(
                        "%s: settling message %s of a batch failed: %s",
                        self.spec.name,
                        each.message.message_id,
                        failure,
                    )
        finally:
            for each in held:
                registry.drop_message(each)
            if session is not None:
                registry.invoking(session, -1)


class _Batches:
    """The messages a batch trigger has received and not dispatched yet, and when they make
    a batch (the extension's ServiceBusMessageManager and MonitorCache): at once with
    minMessageBatchSize 1; else once there are that many, or maxBatchWaitTime after the first
    of them; never more than maxMessageBatchSize in one."""

    def __init__(self, options: ServiceBusOptions) -> None:
        self._options = options
        self._cached: list[ServiceBusReceivedMessage] = []
        self._since = 0.0

    @property
    def cached(self) -> bool:
        return bool(self._cached)

    def room(self) -> int:
        return max(self._options.max_message_batch_size - len(self._cached), 1)

    def wait(self) -> float:
        """How long a receive may wait before the cached messages are due."""
        due = self._since + self._options.max_batch_wait_time - time.monotonic()
        return max(due, 0.05)

    def add(self, received: list[ServiceBusReceivedMessage]) -> None:
        if received and not self._cached:
            self._since = time.monotonic()
        self._cached.extend(received)

    def ready(self) -> list[ServiceBusReceivedMessage] | None:
        if not self._cached:
            return None
        full = len(self._cached) >= self._options.min_message_batch_size
        waited = time.monotonic() - self._since >= self._options.max_batch_wait_time
        if not (full or waited):
            return None
        size = self._options.max_message_batch_size
        batch, self._cached = self._cached[:size], self._cached[size:]
        self._since = time.monotonic()
        return batch

    def rest(self) -> list[ServiceBusReceivedMessage]:
        rest, self._cached = self._cached, []
        return rest


class _Renewal:
    """Keeps one lock, renewing it halfway to its expiry, until maxAutoLockRenewalDuration
    after the latest ``extend()`` (the host bounds the renewal for each message, not for the
    whole life of a busy session). Cancel the task of ``keep`` to stop it."""

    def __init__(self, max_duration: float) -> None:
        self._max_duration = max_duration
        self._until = time.monotonic() + max_duration

    def extend(self) -> None:
        self._until = time.monotonic() + self._max_duration

    async def keep(
        self,
        renew: Callable[[], Awaitable[datetime.datetime]],
        locked_until: datetime.datetime | None,
    ) -> None:
        while time.monotonic() < self._until:
            left = 0.0 if locked_until is None else _seconds_until(locked_until)
            await asyncio.sleep(max(0.05, left / 2))
            if time.monotonic() >= self._until:
                return
            try:
                locked_until = await renew()
            except ServiceBusError as error:
                # The lock is lost (or the receiver closed): whatever uses it next fails and
                # says so.
                logger.debug("Lock renewal stopped: %r", error)
                return


def _seconds_until(moment: datetime.datetime) -> float:
    return (moment - datetime.datetime.now(datetime.UTC)).total_seconds()


class _Outage:
    """Connection failures of one trigger: logged once, and only when they last longer than
    ``_OUTAGE_GRACE_SECONDS`` while the host is not stopping; the recovery is logged too."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._since: float | None = None
        self._logged = False
        self.stopping = False

    def failed(self, error: Exception) -> None:
        now = time.monotonic()
        if self._since is None:
            self._since = now
        if self._logged or self.stopping or now - self._since < _OUTAGE_GRACE_SECONDS:
            logger.debug("%s: Service Bus unreachable: %s", self._name, error)
            return
        self._logged = True
        logger.warning(
            "%s: Service Bus has been unreachable for %.0f s, retrying every %.0f s: %s",
            self._name,
            now - self._since,
            _RETRY_SECONDS,
            error,
        )

    def recovered(self) -> None:
        if self._logged:
            logger.info("%s: Service Bus is reachable again", self._name)
        self._since = None
        self._logged = False
