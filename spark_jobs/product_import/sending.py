"""Sending one Spark partition of planned rows to the import queue (runs on the executors).

A partition holds whole sessions sorted by (session_id, step): its rows go out in that order
through one sender, in ServiceBusMessageBatch-es filled up to the size limit. A batch never
mixes sessions (a partitioned entity refuses a batch with several session ids).

Retries live in one layer, the SDK client's retry policy (``SendOptions`` sets it): it retries
the errors the SDK classifies as transient and reopens the link or connection it closed for
them; nothing here retries on top of it. A batch resent after the broker had accepted it is
dropped by duplicate detection, because message ids are ``f"{job_id}:{row_number}"``. When the
policy gives up, the Spark task fails; Spark may then run the task again (its own re-execution
of lost or failed tasks), which re-sends the partition's rows under the same ids.

Connections: a Python worker runs one task at a time and Spark reuses workers across tasks, so
each worker process keeps the client and sender of its last task open for the next one with
the same settings and queue (the static, lazily built connection that Spark's guide
recommends for ``foreachPartition``). Opening a sender costs the SDK a few hundred
milliseconds; sending a batch of hundreds of messages, less. A sender that raised is closed,
and the next task opens a new one.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusMessageBatch,
    ServiceBusSender,
)
from azure.servicebus.exceptions import MessageSizeExceededError

from shared.config import ServiceBusConnectionSettings
from shared.domain.pipelines import import_message

from .clients import service_bus_client, to_service_bus_message
from .columns import FIELDS

log = logging.getLogger("spark_jobs.product_import.sending")

NO_TRACE: Mapping[str, str] = MappingProxyType({})  # the job exports no telemetry


@dataclass(frozen=True)
class SendOptions:
    """The SDK client's retry policy for sends, the job's only retry layer: at most
    ``max_attempts`` per batch, waiting ``backoff_seconds`` x 2, x 4, ... between them (the SDK
    doubles from the first retry), each wait capped at ``max_backoff_seconds``. The defaults
    ride out about a minute of a namespace refusing or dropping connections."""

    max_attempts: int = 7
    backoff_seconds: float = 0.5
    max_backoff_seconds: float = 30.0

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments for ``ServiceBusClient``."""
        return {
            "retry_total": self.max_attempts - 1,
            "retry_backoff_factor": self.backoff_seconds,
            "retry_backoff_max": self.max_backoff_seconds,
            "retry_mode": "exponential",
        }


def message_id(job_id: str, row_number: int) -> str:
    """Unique per job (TaskMessage.message_id() is job:step, unique only per session)."""
    return f"{job_id}:{row_number}"


def to_message(job_id: str, row: Any, trace: Mapping[str, str] = NO_TRACE) -> ServiceBusMessage:
    """The app's ServiceBusMessage for a planned row (``session_id``, ``step``, ``is_last``,
    ``row_number`` and the payload fields), carrying the trace context ``trace`` (message
    properties, see ``tracing``)."""
    payload = {name: row[name] for name in FIELDS}
    task = import_message(job_id, int(row["step"]), is_last=bool(row["is_last"]), row=payload)
    return to_service_bus_message(
        row["session_id"],
        task,
        message_id=message_id(job_id, int(row["row_number"])),
        trace_context=trace,
    )


class BatchSender(Protocol):
    """What ``send_rows`` needs of a ``ServiceBusSender``."""

    def create_message_batch(self) -> ServiceBusMessageBatch: ...

    def send_messages(self, batch: ServiceBusMessageBatch, /) -> None: ...


def send_rows(
    sender: BatchSender, job_id: str, rows: Iterable[Any], trace: Mapping[str, str] = NO_TRACE
) -> int:
    """Send ``rows`` (sorted by session, then step) in order, each message carrying the trace
    context ``trace``; returns how many were sent."""
    sent = 0
    batch = sender.create_message_batch()
    batch_session: str | None = None

    def flush() -> None:
        nonlocal batch, sent
        if len(batch):
            sender.send_messages(batch)
            sent += len(batch)
        batch = sender.create_message_batch()

    for row in rows:
        if batch_session is not None and row["session_id"] != batch_session:
            flush()
        batch_session = row["session_id"]
        message = to_message(job_id, row, trace)
        try:
            batch.add_message(message)
        except MessageSizeExceededError:
            flush()
            batch.add_message(message)  # a single message too large for a batch fails the job
    flush()
    return sent


class WorkerSender:
    """The open sender of this process, kept for the next partition with the same settings,
    queue and options; another key closes it and opens a new one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: tuple[ServiceBusConnectionSettings, str, SendOptions] | None = None
        self._client: ServiceBusClient | None = None
        self._sender: ServiceBusSender | None = None

    @contextmanager
    def sender(
        self, connection: ServiceBusConnectionSettings, queue_name: str, options: SendOptions
    ) -> Iterator[ServiceBusSender]:
        """The sender, held for the caller alone; closed when the caller raises."""
        with self._lock:
            key = (connection, queue_name, options)
            if self._sender is None or self._key != key:
                self._close()
                client = service_bus_client(connection, **options.client_options())
                self._client, self._key = client, key
                self._sender = client.get_queue_sender(queue_name)
            try:
                yield self._sender
            except BaseException:
                self._close()
                raise

    def close(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        sender, client = self._sender, self._client
        self._sender = self._client = self._key = None
        for handler in (sender, client):
            if handler is not None:
                with suppress(Exception):  # closing what failed must not hide why it failed
                    handler.close()


WORKER_SENDER = WorkerSender()


def send_partition(
    *,
    job_id: str,
    queue_name: str,
    connection: ServiceBusConnectionSettings,
    options: SendOptions,
    sent: Any,
    trace: Mapping[str, str] = NO_TRACE,
) -> Callable[[Iterable[Any]], None]:
    """The function ``foreachPartition`` runs: sends the partition's rows through this
    worker's sender and adds how many it sent to the ``sent`` accumulator. Every message carries
    the job's trace context ``trace`` (message properties, see ``tracing``).

    Only the settings (plain data) travel to the executors, never a client or a credential
    (they hold connections, locks and tokens): the worker builds its client, and for an
    identity-based connection its DefaultAzureCredential, on the executor. The function is a
    partial of a module-level function, so the executor runs it with this module's globals,
    where the worker's sender lives between tasks."""
    return functools.partial(
        _send_partition,
        job_id=job_id,
        queue_name=queue_name,
        connection=connection,
        options=options,
        sent=sent,
        trace=dict(trace),
    )


def _send_partition(
    rows: Iterable[Any],
    *,
    job_id: str,
    queue_name: str,
    connection: ServiceBusConnectionSettings,
    options: SendOptions,
    sent: Any,
    trace: Mapping[str, str],
) -> None:
    iterator = iter(rows)
    first = next(iterator, None)
    if first is None:
        return
    with WORKER_SENDER.sender(connection, queue_name, options) as sender:
        sent.add(send_rows(sender, job_id, _chain(first, iterator), trace))


def _chain(first: Any, rest: Iterable[Any]) -> Iterable[Any]:
    yield first
    yield from rest
