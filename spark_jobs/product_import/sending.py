"""Sending one Spark partition of planned rows to the import queue (runs on the executors).

A partition holds whole sessions sorted by (session_id, step): its rows go out in that order
through one ServiceBusClient and one sender, in ServiceBusMessageBatch-es filled up to the size
limit. A batch never mixes sessions (a partitioned entity refuses a batch with several session
ids). Transient failures are retried with exponential backoff; a batch that is resent after a
failure that happened after the broker accepted it is dropped by duplicate detection, because
message ids are ``f"{job_id}:{row_number}"``.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from azure.servicebus import ServiceBusMessage, ServiceBusSender
from azure.servicebus.exceptions import (
    MessageSizeExceededError,
    ServiceBusConnectionError,
    ServiceBusError,
)

from shared.adapters.azure_clients import service_bus_client
from shared.adapters.servicebus_sender import to_service_bus_message
from shared.config import ServiceBusConnectionSettings
from shared.domain.pipelines import import_message

log = logging.getLogger("spark_jobs.product_import.sending")

PAYLOAD_FIELDS = ("sku", "name", "price", "currency", "description")


@dataclass(frozen=True)
class SendOptions:
    """Retries as data: attempts per batch and the backoff between them."""

    max_attempts: int = 6
    min_backoff_seconds: float = 0.5
    max_backoff_seconds: float = 30.0


def message_id(job_id: str, row_number: int) -> str:
    """Unique per job (TaskMessage.message_id() is job:step, unique only per session)."""
    return f"{job_id}:{row_number}"


def to_message(job_id: str, row: Any) -> ServiceBusMessage:
    """The app's ServiceBusMessage for a planned row (``session_id``, ``step``, ``is_last``,
    ``row_number`` and the payload fields)."""
    payload = {name: row[name] for name in PAYLOAD_FIELDS}
    task = import_message(job_id, int(row["step"]), is_last=bool(row["is_last"]), row=payload)
    return to_service_bus_message(
        row["session_id"], task, message_id=message_id(job_id, int(row["row_number"]))
    )


def is_transient(error: BaseException) -> bool:
    if isinstance(error, ServiceBusConnectionError):
        return True
    return isinstance(error, ServiceBusError) and bool(getattr(error, "retryable", False))


def send_with_retry(
    send: Callable[[], None], options: SendOptions, *, sleep: Callable[[float], None] = time.sleep
) -> None:
    """Call ``send`` until it succeeds, retrying transient errors with exponential backoff
    and jitter; a permanent error, or the last transient one, is raised."""
    for attempt in range(1, options.max_attempts + 1):
        try:
            send()
            return
        except Exception as error:
            if not is_transient(error) or attempt == options.max_attempts:
                raise
            delay = min(
                options.max_backoff_seconds, options.min_backoff_seconds * 2 ** (attempt - 1)
            )
            log.warning("send failed (%s), attempt %d; retrying in %.1fs", error, attempt, delay)
            sleep(delay * random.uniform(0.5, 1.0))


def send_rows(
    sender: ServiceBusSender, job_id: str, rows: Iterable[Any], options: SendOptions
) -> int:
    """Send ``rows`` (sorted by session, then step) in order; returns how many were sent."""
    sent = 0
    batch = sender.create_message_batch()
    batch_session: str | None = None

    def flush() -> None:
        nonlocal batch, sent
        if len(batch):
            full = batch
            send_with_retry(lambda: sender.send_messages(full), options)
            sent += len(full)
        batch = sender.create_message_batch()

    for row in rows:
        if batch_session is not None and row["session_id"] != batch_session:
            flush()
        batch_session = row["session_id"]
        message = to_message(job_id, row)
        try:
            batch.add_message(message)
        except MessageSizeExceededError:
            flush()
            batch.add_message(message)  # a single message too large for a batch fails the job
    flush()
    return sent


def send_partition(
    *,
    job_id: str,
    queue_name: str,
    connection: ServiceBusConnectionSettings,
    options: SendOptions,
    sent: Any,
) -> Callable[[Iterable[Any]], None]:
    """The function ``foreachPartition`` runs: one client per partition; adds the number of
    messages sent to the ``sent`` accumulator.

    Only the settings (plain data) travel to the executors, never a client or a credential
    (they hold connections, locks and tokens): each partition builds its client, and for an
    identity-based connection its DefaultAzureCredential, on the executor."""

    def run(rows: Iterable[Any]) -> None:
        iterator = iter(rows)
        first = next(iterator, None)
        if first is None:
            return
        with (
            service_bus_client(connection) as client,
            client.get_queue_sender(queue_name) as sender,
        ):
            sent.add(send_rows(sender, job_id, _chain(first, iterator), options))

    return run


def _chain(first: Any, rest: Iterable[Any]) -> Iterable[Any]:
    yield first
    yield from rest
