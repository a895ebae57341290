"""Azure Storage queue triggers, with host.json extensions.queues semantics.

Messages are base64 (messageEncoding "base64", the default) or plain text ("none"). The host
takes up to batchSize messages at a time and runs them in parallel, fetching the next batch
when the ones in flight drop to newBatchThreshold (batchSize / 2 by default). A successful
invocation deletes the message; a failed one makes it visible again after visibilityTimeout.
A message that failed maxDequeueCount times (or is seen with a higher dequeue count) moves to
``<queue>-poison``. An empty queue is polled with exponential backoff up to
maxPollingInterval.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from typing import Any

from azure.core.exceptions import AzureError, ResourceExistsError
from azure.storage.queue import QueueClient, QueueMessage

from .config import QueueOptions
from .functions import FunctionSpec, invoke
from .rpc import messages, typed_metadata

logger = logging.getLogger("functions_local_host")

_MIN_POLL_SECONDS = 0.1
# Like the host: a received message stays invisible for 10 minutes while its function runs.
_LEASE_SECONDS = 600


class QueueListener:
    def __init__(
        self, spec: FunctionSpec, *, connection_string: str, options: QueueOptions
    ) -> None:
        self.spec = spec
        self.queue_name = str(spec.setting("queueName"))
        self.poison_queue_name = f"{self.queue_name}-poison"
        self._options = options
        self._queue = QueueClient.from_connection_string(connection_string, self.queue_name)
        self._poison = QueueClient.from_connection_string(connection_string, self.poison_queue_name)
        self._pool = ThreadPoolExecutor(
            max_workers=options.batch_size, thread_name_prefix=spec.name
        )
        self._threshold = (
            options.new_batch_threshold
            if options.new_batch_threshold is not None
            else options.batch_size // 2
        )
        self._in_flight_count = 0
        self._count_lock = threading.Condition()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"{spec.name}-poll", daemon=True)

    def start(self) -> None:
        for client in (self._queue, self._poison):
            with contextlib.suppress(ResourceExistsError):
                client.create_queue()
        self._thread.start()

    def stop(self, timeout: float) -> None:
        self._stopping.set()
        self._thread.join(timeout)
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._queue.close()
        self._poison.close()

    def _run(self) -> None:
        delay = _MIN_POLL_SECONDS
        while not self._stopping.is_set():
            with self._count_lock:
                self._count_lock.wait_for(
                    lambda: self._in_flight_count <= self._threshold or self._stopping.is_set(),
                    timeout=1.0,
                )
                room = self._options.batch_size - self._in_flight_count
            if room <= 0 or self._stopping.is_set():
                continue
            try:
                messages = list(
                    self._queue.receive_messages(
                        max_messages=room,
                        visibility_timeout=_LEASE_SECONDS,
                    )
                )
            except AzureError as error:
                logger.warning("%s: cannot read %s: %s", self.spec.name, self.queue_name, error)
                messages = []
            if not messages:
                self._stopping.wait(delay)
                delay = min(delay * 2, self._options.max_polling_interval)
                continue
            delay = _MIN_POLL_SECONDS
            for message in messages:
                with self._count_lock:
                    self._in_flight_count += 1
                self._pool.submit(self._process, message).add_done_callback(_report)

    def _process(self, message: QueueMessage) -> None:
        try:
            self._process_one(message)
        except AzureError as error:
            logger.warning("%s: message %s: %s", self.spec.name, message.id, error)
        finally:
            with self._count_lock:
                self._in_flight_count -= 1
                self._count_lock.notify_all()

    def _process_one(self, message: QueueMessage) -> None:
        max_dequeue = self._options.max_dequeue_count
        dequeue_count = message.dequeue_count or 1
        if dequeue_count > max_dequeue:
            self._to_poison(message)
            return
        body = self._decode(message.content)
        succeeded = False
        if body is not None:
            succeeded = invoke(
                self.spec,
                _message_data(body),
                trigger_metadata=typed_metadata(binding_data(message, body)),
                reason=f"New queue message detected on '{self.queue_name}'.",
                log_detail=f"\n  Trigger Details: MessageId: {message.id}, "
                f"DequeueCount: {message.dequeue_count}, InsertionTime: {message.inserted_on}",
            ).succeeded
        if succeeded:
            self._queue.delete_message(message)
        elif dequeue_count >= max_dequeue:
            self._to_poison(message)
        else:
            self._queue.update_message(
                message, visibility_timeout=int(self._options.visibility_timeout)
            )

    def _decode(self, content: str | bytes | None) -> bytes | None:
        raw = content if isinstance(content, bytes) else (content or "").encode()
        if self._options.message_encoding == "none":
            return raw
        try:
            return base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            logger.error(
                "%s: a message on %s is not base64 (host.json messageEncoding is base64); it "
                "counts as a failed attempt",
                self.spec.name,
                self.queue_name,
            )
            return None

    def _to_poison(self, message: QueueMessage) -> None:
        logger.warning(
            "Message has reached MaxDequeueCount of %d. Moving message to queue '%s'.",
            self._options.max_dequeue_count,
            self.poison_queue_name,
        )
        self._poison.send_message(message.content)
        self._queue.delete_message(message)


def _message_data(body: bytes) -> Any:
    """The message as the host sends it: text as a string, other bytes as bytes."""
    try:
        return messages.TypedData(string=body.decode("utf-8"))
    except UnicodeDecodeError:
        return messages.TypedData(bytes=body)


def binding_data(message: QueueMessage, body: bytes) -> dict[str, Any]:
    """The Storage queue extension's binding data (trigger metadata) for one message."""
    return {
        "QueueTrigger": body.decode("utf-8", errors="replace"),
        "DequeueCount": message.dequeue_count,
        "ExpirationTime": _iso(message.expires_on),
        "Id": message.id,
        "InsertionTime": _iso(message.inserted_on),
        "NextVisibleTime": _iso(message.next_visible_on),
        "PopReceipt": message.pop_receipt,
    }


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def _report(future: Future[None]) -> None:
    error = future.exception() if not future.cancelled() else None
    if error is not None:
        logger.error("The queue listener failed", exc_info=error)
