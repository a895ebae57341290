"""Service Bus operations and Storage requests per order and per import row, measured on the
local stack while real orders and rows go through it: the capacity model's input
(docs/capacity.md).

``.venv/bin/python -m bench.operation_counts`` (``--orders 20 --rows 100``)

- **Service Bus**, by entity and kind, as the broker (the project's emulator) counts what its
  clients ask of it (``GET /operations``): the app's sends, and everything the Functions host
  does for the triggers (accepting sessions, receiving, settling, session state, lock
  renewals, closing a session receiver). In Azure the host does the same on the namespace.
- **Storage**, by table or container and kind, as the app counts its own requests (the
  ``storage.requests`` metric, exported over OTLP to a receiver this process starts).

The stack is the one ``make up`` starts (``localdev.stack.run_stack``, host.json as shipped,
the example settings), in this process, on free 127.0.0.1 ports; the archive timer is moved
out of the way. One product is imported first; then the orders are posted one after another
(each waits for its receipt e-mail, so no two allocate an order number at once), then the
rows are sent as one session, as the Spark job sends them. Each part is counted from the
quiet stack before it to the quiet stack after it. What depends on time and not on the work
(a session slot that waited for a session and found none, the dead-letter queues that the
archive timer reads) is left out of the per-item counts and listed apart.
"""

from __future__ import annotations

import argparse
import itertools
import os
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from localdev.api_client import AppClient
from localdev.otlp_receiver import OtlpReceiver, run_otlp_receiver
from localdev.stack import LocalStack, run_stack
from shared.adapters.azure_clients import PAYMENTS_TABLE
from shared.adapters.servicebus_sender import to_service_bus_message
from shared.adapters.table_pipeline_pauses import PIPELINE_PAUSES_TABLE as PIPELINE_PAUSES
from shared.adapters.table_products import partition_of
from shared.adapters.table_timer_runs import TIMER_RUNS_TABLE as TIMER_RUNS
from shared.domain.pipelines import import_message
from shared.telemetry.setup import telemetry, use_telemetry

SERVICE_BUS = "Service Bus"
STORAGE = "Storage"
Key = tuple[str, str, str]  # service, entity / table / container, kind
IDLE_KINDS = frozenset({"accept session (none available)"})
QUIET_SECONDS = 1.0  # no operation for this long: the stack has finished the part
BENCH_SETTINGS = {
    "DLQ_ARCHIVE_SCHEDULE": "0 0 0 1 1 *",  # once a year: out of the way
    "PURGE_SCHEDULE": "0 0 0 1 1 *",  # the purge timer too
    # The app's Storage requests are counted by its metrics, which this process flushes: the
    # worker runs in the host's process here, not in one of its own.
    "LOCALDEV_WORKER_PROCESSES": "false",
}


@dataclass(frozen=True)
class Measured:
    """Counts per item (order or row) of the work, and what happened beside it."""

    items: int
    per_item: dict[Key, float]
    beside: dict[Key, int]  # idle and background operations in the same window


def snapshot(stack: LocalStack, otlp: OtlpReceiver) -> Counter[Key]:
    telemetry().flush()
    counts: Counter[Key] = Counter()
    for entity, kinds in stack.emulator.operations().items():
        for kind, n in kinds.items():
            counts[(SERVICE_BUS, entity, kind)] += int(n)
    for point in otlp.metric("storage.requests"):
        resource = str(point.attributes.get("storage.resource"))
        kind = str(point.attributes.get("storage.operation"))
        counts[(STORAGE, resource, kind)] += int(point.value or 0)
    return counts


def quiet(stack: LocalStack, otlp: OtlpReceiver, timeout: float = 60) -> Counter[Key]:
    """The counts once nothing but idle work has changed them for ``QUIET_SECONDS`` and no
    dead letter waits in a queue: the archive timer's next run would archive it (Storage
    requests in the middle of the next part), and its receive waits for more first, longer
    than ``QUIET_SECONDS``, with nothing counted."""
    deadline = time.monotonic() + timeout
    last = work(snapshot(stack, otlp))
    while time.monotonic() < deadline:
        time.sleep(QUIET_SECONDS)
        now = snapshot(stack, otlp)
        if work(now) == last and not dead_letters_waiting(stack):
            return now
        last = work(now)
    raise TimeoutError(f"the stack did not settle within {timeout}s")


def dead_letters_waiting(stack: LocalStack) -> int:
    return sum(int(c.get("dead_lettered", 0)) for c in stack.emulator.counts().values())


def work(counts: Counter[Key]) -> Counter[Key]:
    return Counter({key: n for key, n in counts.items() if not idle(key)})


def idle(key: Key) -> bool:
    """Work that depends on time, not on the orders and rows: an idle slot's wait, the archive
    timer's reads of the dead-letter queues and its record of each run, a pipeline's gate
    reading whether an operator paused it (at most once per 5 s while its tasks run), the
    simulated payment provider reading its outage switch (at most once a second; a paid
    order's charge reads nothing)."""
    return (
        key[2] in IDLE_KINDS
        or "$deadletterqueue" in key[1].lower()
        or key[1] in (TIMER_RUNS, PIPELINE_PAUSES)
        or key[1:] == (PAYMENTS_TABLE, "point read")
    )


def measured(before: Counter[Key], after: Counter[Key], items: int) -> Measured:
    delta = after - before
    return Measured(
        items,
        {key: n / items for key, n in sorted(delta.items()) if not idle(key)},
        {key: n for key, n in sorted(delta.items()) if idle(key)},
    )


def wait_for_receipt(stack: LocalStack, job_id: str, timeout: float = 60) -> None:
    wanted = f"<{job_id}.receipt@pipelines.local>"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(str(m.get("Message-ID")) == wanted for m in stack.email.received()):
            return
        time.sleep(0.05)
    raise TimeoutError(f"no receipt for {job_id} within {timeout}s")


def send_rows(stack: LocalStack, job_id: str, rows: list[dict[str, Any]]) -> None:
    """One import session, as the Spark job sends it (message id job:row, the last marked)."""
    from azure.servicebus import ServiceBusClient

    queue = stack.settings["IMPORT_QUEUE_NAME"]
    with (
        ServiceBusClient.from_connection_string(stack.servicebus_connection_string) as client,
        client.get_queue_sender(queue) as sender,
    ):
        sender.send_messages(
            [
                to_service_bus_message(
                    f"{job_id}-0000",
                    import_message(job_id, step, is_last=step == len(rows), row=row),
                    message_id=f"{job_id}:{step}",
                )
                for step, row in enumerate(rows, start=1)
            ]
        )


def product(sku: str) -> dict[str, Any]:
    return {"sku": sku, "name": "Tea", "price": "3.00", "currency": "EUR"}


def order(sku: str, index: int) -> dict[str, Any]:
    return {
        "customer_email": f"counts-{index}@example.com",
        "customer_name": "Ada",
        "card_token": "tok_visa_4242",
        "currency": "EUR",
        "lines": [{"sku": sku, "quantity": 1}],
    }


def measure_orders(stack: LocalStack, otlp: OtlpReceiver, sku: str, orders: int) -> Measured:
    """``orders`` paid single-line orders of ``sku`` (in the catalogue), one after another,
    after one that is not counted: the worker then allocates order numbers as it does once
    it has taken an order (on the counter it last wrote)."""
    api = AppClient(stack.api_url, stack.function_key)
    warm = api.submit_order(order(sku, -1), idempotency_key=uuid.uuid4().hex)
    wait_for_receipt(stack, str(warm["job_id"]))
    before = quiet(stack, otlp)
    for index in range(orders):
        answer = api.submit_order(order(sku, index), idempotency_key=uuid.uuid4().hex)
        wait_for_receipt(stack, str(answer["job_id"]))
    return measured(before, quiet(stack, otlp), orders)


@dataclass(frozen=True)
class ImportCounts:
    """An import costs ``per_row`` for each row and ``per_session`` for each session."""

    per_row: dict[Key, float]
    per_session: dict[Key, float]
    beside: dict[Key, int]


def one_partition(prefix: str, count: int) -> list[str]:
    """``count`` SKUs that share one partition of the products table: a batch writes its
    products in one transaction per partition they fall in (at most ``PARTITIONS``), so
    SKUs in one partition make that count one per batch, the same in every run."""
    skus = (f"COUNT-{prefix}-{n}" for n in itertools.count())
    first = next(skus)
    return [first, *itertools.islice((s for s in skus if same_partition(s, first)), count - 1)]


def same_partition(sku: str, other: str) -> bool:
    return partition_of(sku) == partition_of(other)


def measure_rows(stack: LocalStack, otlp: OtlpReceiver, rows: int) -> ImportCounts:
    """A session of ``rows`` valid rows, then one of twice as many: what the second costs
    more is ``rows`` rows' worth, the rest is the session's own."""
    sessions = []
    for size in (rows, 2 * rows):
        run = uuid.uuid4().hex[:8]
        before = quiet(stack, otlp)
        send_rows(stack, f"counts-{run}", [product(sku) for sku in one_partition(run, size)])
        sessions.append(measured(before, quiet(stack, otlp), 1))
    small, large = (session.per_item for session in sessions)
    keys = set(small) | set(large)
    per_row = {k: (large.get(k, 0) - small.get(k, 0)) / rows for k in keys}
    per_session = {k: small.get(k, 0) - rows * per_row[k] for k in keys}
    return ImportCounts(
        {k: n for k, n in sorted(per_row.items()) if n},
        {k: n for k, n in sorted(per_session.items()) if n},
        dict(Counter(sessions[0].beside) + Counter(sessions[1].beside)),
    )


@contextmanager
def counted_stack(settings: dict[str, str] | None = None) -> Iterator[tuple[LocalStack, Any]]:
    """A stack in this process whose app exports its metrics to a receiver of ours."""
    with run_otlp_receiver() as otlp:
        use_telemetry(None)
        overrides = {
            **BENCH_SETTINGS,
            **(settings or {}),
            "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint,
        }
        try:
            with run_stack(overrides=overrides) as stack:
                yield stack, otlp
        finally:
            telemetry().shutdown()
            use_telemetry(None)


def table(orders: Measured, rows: ImportCounts) -> str:
    """The counts as docs/capacity.md holds them (``documented`` reads them back)."""
    columns = (orders.per_item, rows.per_row, rows.per_session)
    lines = [
        "| service | entity, table or container | kind | per order | per import row "
        "| per import session |",
        "|---|---|---|---|---|---|",
    ]
    for key in sorted(set().union(*columns)):
        counts = " | ".join(number(column.get(key, 0)) for column in columns)
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {counts} |")
    for service in (SERVICE_BUS, STORAGE):
        totals = " | ".join(
            f"**{number(sum(n for k, n in column.items() if counted(k, service)))}**"
            for column in columns
        )
        lines.append(f"| **{service}** | | **all** | {totals} |")
    return "\n".join(lines)


def counted(key: Key, service: str) -> bool:
    """In the totals: every kind but the batches, whose messages are counted one by one (as
    Service Bus Standard's throttling counts sends: one credit per message)."""
    return key[0] == service and not key[2].endswith("(batches)")


def documented(text: str) -> dict[str, dict[Key, float]]:
    """The per-order, per-row and per-session counts of a table made by ``table``."""
    found: dict[str, dict[Key, float]] = {"order": {}, "row": {}, "session": {}}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 6 or cells[0] not in (SERVICE_BUS, STORAGE):
            continue
        key = (cells[0], cells[1], cells[2])
        for column, cell in zip(found, cells[3:], strict=True):
            if float(cell):
                found[column][key] = float(cell)
    return found


def number(value: float) -> str:
    return f"{value:.0f}" if value == int(value) else f"{value:.2f}"


def beside(run: Measured | ImportCounts, what: str, seconds: float) -> str:
    found = ", ".join(f"{k[1]} {k[2]}: {n}" for k, n in run.beside.items()) or "none"
    return f"Beside the {what} ({seconds:.1f} s), not counted per item: {found}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", type=int, default=20)
    parser.add_argument(
        "--rows", type=int, default=50, help="import sessions of this many rows and twice as many"
    )
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    with counted_stack() as (stack, otlp):
        sku = f"COUNT-{uuid.uuid4().hex[:8]}"
        send_rows(stack, f"catalogue-{sku}", [product(sku)])
        quiet(stack, otlp)
        started = time.monotonic()
        orders = measure_orders(stack, otlp, sku, args.orders)
        order_seconds, started = time.monotonic() - started, time.monotonic()
        rows = measure_rows(stack, otlp, args.rows)
        row_seconds = time.monotonic() - started
    load_after = os.getloadavg()
    print(
        f"{len(os.sched_getaffinity(0))} cores; load average {load_before[0]:.2f} before, "
        f"{load_after[0]:.2f} after; {args.orders} orders one after another, "
        f"import sessions of {args.rows} and {2 * args.rows} rows\n"
    )
    print(table(orders, rows))
    print()
    print(beside(orders, "orders", order_seconds))
    print(beside(rows, "rows", row_seconds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
