"""CPU per task span and per log record of the app's telemetry, exported over OTLP/HTTP: what
the tracing overhead of the pipeline bench is made of.

``.venv/bin/python -m bench.telemetry_cost`` (``--items 5000``).

In this process, with the app's own code (``shared.telemetry``): N task spans as the session
trigger opens them (``task_invocation``: a message with a ``traceparent``, the messaging and
pipeline attributes, the result recorded on the span and in the metrics), then N log records
emitted inside a span, each loop with telemetry off (nothing configured) and on (exporting to
a ``localdev.otlp_receiver`` that runs in a child process, so its decoding is not counted),
flushed every 500 items.
Logging goes to a file handler on the root logger in both, as in the bench's stack. CPU is
``time.process_time()`` (every thread of this process, so the SDK's batch processors and
exporters are in) from the loop's start until ``force_flush`` has exported everything.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection

from localdev.otlp_receiver import run_otlp_receiver
from shared.service_layer.session_messages import IncomingMessage, Outcome, Result
from shared.service_layer.task_telemetry import task_invocation
from shared.telemetry.plan import Telemetry
from shared.telemetry.setup import OTLP_ENDPOINT, configure_telemetry, use_telemetry

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
# Flushed every this many items, under the batch processors' queue (2,048), so none is dropped:
# about one export per batch (512) as at the pipeline's own rate.
CHUNK = 500
logger = logging.getLogger("shared.entrypoints.session_tasks")


def _receiver(conn: Connection) -> None:
    """The child process: an OTLP receiver until the parent says stop; then its counts."""
    with run_otlp_receiver() as receiver:
        conn.send(receiver.endpoint)
        conn.recv()
        conn.send((len(receiver.spans()), len(receiver.logs())))


@contextmanager
def receiver_process() -> Iterator[tuple[str, Callable[[], tuple[int, int]]]]:
    """An OTLP endpoint in a child process, and a call that stops it and returns the spans
    and log records it received."""
    parent, child = multiprocessing.get_context("spawn").Pipe()
    process = multiprocessing.get_context("spawn").Process(target=_receiver, args=(child,))
    process.start()
    received: list[tuple[int, int]] = []

    def stop() -> tuple[int, int]:
        if not received:
            parent.send("stop")
            received.append(parent.recv())
        return received[0]

    try:
        yield str(parent.recv()), stop
    finally:
        stop()
        process.join(timeout=30)


def spans(count: int) -> None:
    for i in range(count):
        incoming = IncomingMessage(
            b"{}",
            session_id=f"job-{i}",
            delivery_count=1,
            message_id=f"job-{i}:1",
            application_properties={"traceparent": TRACEPARENT, "task": "CalculateTotal"},
        )
        with task_invocation(pipeline="purchase", queue="purchase-tasks", incoming=incoming) as r:
            r(Result(Outcome.COMPLETED, task="CalculateTotal", step=1, attempt=1))


def log_records(count: int, current: Telemetry) -> None:
    if current.tracer is None:
        for i in range(count):
            logger.info("pipeline=purchase session=job-%d outcome=completed", i)
        return
    with current.tracer.start_as_current_span("records"):
        for i in range(count):
            logger.info("pipeline=purchase session=job-%d outcome=completed", i)


def measure(current: Telemetry, items: int) -> tuple[float, float]:
    """CPU µs per span and per log record with ``current``, exports flushed."""
    chunks = [min(CHUNK, items - done) for done in range(0, items, CHUNK)]
    use_telemetry(current)
    try:
        started = time.process_time()
        for chunk in chunks:
            spans(chunk)
            current.flush()
        per_span = (time.process_time() - started) / items * 1e6
        started = time.process_time()
        for chunk in chunks:
            log_records(chunk, current)
            current.flush()
        per_record = (time.process_time() - started) / items * 1e6
    finally:
        current.shutdown()
        use_telemetry(None)
    return per_span, per_record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.telemetry_cost", description=__doc__)
    parser.add_argument("--items", type=int, default=5000, help="spans, then log records")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, filename=os.devnull, force=True)
    load_before = os.getloadavg()
    spans(100)  # imports and first-use costs out of the way
    off = measure(configure_telemetry({}), args.items)
    with receiver_process() as (endpoint, stop):
        on = measure(configure_telemetry({OTLP_ENDPOINT: endpoint}), args.items)
        received_spans, received_logs = stop()
    load_after = os.getloadavg()
    print(
        f"{len(os.sched_getaffinity(0))} cores; load average {load_before[0]:.1f} before, "
        f"{load_after[0]:.1f} after (1 min)\n"
    )
    print("| item | telemetry off (µs CPU) | on, exported over OTLP/HTTP (µs CPU) | added (µs) |")
    print("|---|---|---|---|")
    for name, a, b in (("task span", off[0], on[0]), ("log record", off[1], on[1])):
        print(f"| {name} | {a:.0f} | {b:.0f} | {b - a:.0f} |")
    print(
        f"\nThe receiver got {received_spans:,} spans and {received_logs:,} log records "
        f"({args.items:,} task spans and {args.items:,} log records sent, the records in "
        f"{len(range(0, args.items, CHUNK))} spans)."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
