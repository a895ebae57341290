"""``GET /api/overview`` on a store of 2,000 orders and 1,000 failed sessions.

``.venv/bin/python -m bench.overview_bench`` (``--orders 2000 --sessions 1000 --requests 30
--logs DIR``).

The stack of ``make up`` runs in a process of its own (``bench.stack_process``: Azurite, the
project's Service Bus emulator, the SMTP sink, the local host running function_app.py with the
example settings). The bench writes the store straight into its Azurite, as the app's adapters
write it: the orders' progress rows (``orderprogress``: 70% completed, 15% failed at
ProcessPayment, 15% still running at CalculateTotal; one entity-group transaction per order)
and the failed sessions' summary rows (``failedsessions``: 70% failed, 20% replayed, 10%
resolved, in eight failure groups). Then it calls ``GET /api/overview`` through the local
host, one request at a time, ``--requests`` times after one warm-up call, and reports the
median, p95 and slowest, with the figures the answer gave (so a reader sees the store was
counted), and the host + app's CPU per request (the console refreshes its overview every 5
s: what one open console costs). It also times each read the overview makes, in this process
with the app's own adapters, to show where the time goes.

Prints the machine's core count and load average before and after, and a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from azure.data.tables import TableServiceClient

from bench.proc import cores
from bench.stack_client import HOST, cpu_used, stack_process
from shared.adapters.azure_clients import FAILED_SESSIONS_TABLE, ORDER_PROGRESS_TABLE
from shared.adapters.table_failed_sessions import SUMMARY_ROW
from shared.adapters.table_keys import table_key
from shared.bootstrap import Container, app_pipelines
from shared.config import Settings
from shared.domain.pipelines import PURCHASE_TASKS
from shared.service_layer import overview as overview_service
from shared.service_layer.failed_sessions import group_by_status

AT = "2026-11-23T09:00:00+00:00"
GROUPS = [
    ("purchase-tasks", "ProcessPayment", "PaymentDeclined"),
    ("purchase-tasks", "ProcessPayment", "PaymentProviderUnavailable"),
    ("purchase-tasks", "CalculateTotal", "UnknownSku"),
    ("purchase-tasks", "CalculateTotal", "InvalidOrder"),
    ("purchase-tasks", "SendReceiptEmail", "EmailRejected"),
    ("product-import-tasks", "ImportProduct", "InvalidProduct:price"),
    ("product-import-tasks", "ImportProduct", "InvalidProduct:currency"),
    ("product-import-tasks", "ImportProduct", "InvalidProduct:sku"),
]


def order_rows(n: int) -> list[dict[str, Any]]:
    """One order's progress rows: accepted, and the outcome of each step reached."""
    job_id = f"bench-order-{n:05d}-{uuid.uuid4().hex[:6]}"
    session_id = f"{job_id}-session"
    key = table_key(job_id)
    kind = n % 20
    if kind < 14:
        reached = [(step, "completed") for step in range(1, len(PURCHASE_TASKS) + 1)]
    elif kind < 17:
        reached = [(1, "completed"), (2, "completed"), (3, "failed")]
    else:
        reached = [(1, "completed")]
    rows: list[dict[str, Any]] = [
        {
            "PartitionKey": key,
            "RowKey": "accepted",
            "job_id": job_id,
            "session_id": session_id,
            "at": AT,
        }
    ]
    for step, status in reached:
        row = {
            "PartitionKey": key,
            "RowKey": f"step-{step:09d}",
            "step": step,
            "task": PURCHASE_TASKS[step - 1],
            "status": status,
            "session_id": session_id,
            "at": AT,
        }
        if status == "failed":
            row["reason"] = "PaymentDeclined"
        rows.append(row)
    return rows


def session_row(n: int) -> dict[str, Any]:
    """One failed session's summary row, as the archive and the claims write it."""
    session_id = f"bench-session-{n:05d}-{uuid.uuid4().hex[:6]}"
    queue, task, reason = GROUPS[n % len(GROUPS)]
    row: dict[str, Any] = {
        "PartitionKey": table_key(session_id),
        "RowKey": SUMMARY_ROW,
        "session_id": session_id,
        "queue": queue,
        "failed_task": task,
        "failed_step": 3,
        "reason": reason,
        "description": f"The card of order {n} was declined: ask for another card.",
        "failed_at": AT,
        "message_count": 5,
        "has_last": True,
        "context": json.dumps({"order_number": f"ORD-{n:06d}", "total": "17.45"}),
        "status": "failed",
    }
    kind = n % 10
    if kind in (7, 8):
        row.update(
            status="replayed",
            replayed_session_id=f"{session_id}-replay",
            replay_key=f"key-{n}",
            replayed_at=AT,
            claim_key=f"key-{n}",
            claim_session_id=f"{session_id}-replay",
            claimed_at=AT,
            claim_action="replay",
        )
    elif kind == 9:
        row.update(status="resolved", claim_key=f"key-{n}", claimed_at=AT, claim_action="resolve")
    return row


def seed(storage: str, orders: int, sessions: int) -> float:
    """Write the store; the seconds it took."""
    started = time.monotonic()
    service = TableServiceClient.from_connection_string(storage)
    progress = service.get_table_client(ORDER_PROGRESS_TABLE)
    for n in range(orders):
        progress.submit_transaction([("upsert", row) for row in order_rows(n)])
    summaries = service.get_table_client(FAILED_SESSIONS_TABLE)
    for n in range(sessions):
        summaries.upsert_entity(session_row(n))
    return time.monotonic() - started


def get_overview(api_url: str, key: str) -> tuple[float, dict[str, Any]]:
    request = urllib.request.Request(f"{api_url}/overview", headers={"x-functions-key": key})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=120) as response:
        document = json.load(response)
    return time.perf_counter() - started, document


def time_reads(storage: str, servicebus: str) -> list[tuple[str, float]]:
    """Each read of the overview, timed alone in this process with the app's adapters."""
    settings = Settings.from_env(
        pipelines=app_pipelines({}).declared,
        environ={
            **json.loads((Path(__file__).parents[1] / "local.settings.json.example").read_text())[
                "Values"
            ],
            "AzureWebJobsStorage": storage,
            "ServiceBusConnection": servicebus,
        },
    )
    c = Container(settings)
    sources = c.overview_sources
    queues = c.session_queues
    reads: list[tuple[str, Callable[[], object]]] = [
        ("the whole overview", lambda: overview_service.overview(sources, queues)),
        ("orders by status", lambda: overview_service.count_orders(sources.orders)),
        (
            "import jobs in progress",
            lambda: overview_service.imports_in_progress(sources.manifests, sources.imports),
        ),
        (
            "failed sessions by group and status",
            lambda: group_by_status(sources.archive),
        ),
        (
            "dead letters waiting (each session queue)",
            lambda: [
                sources.counter.waiting(q, up_to=overview_service.WAITING_COUNT_MAX) for q in queues
            ],
        ),
    ]
    for _, read in reads:
        read()  # warm: clients and connections, as in the running app
    timed = []
    for name, read in reads:
        started = time.perf_counter()
        read()
        timed.append((name, time.perf_counter() - started))
    return timed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.overview_bench")
    parser.add_argument("--orders", type=int, default=2000)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--logs", default=None, help="where the stack's log goes")
    args = parser.parse_args(argv)

    load_before = os.getloadavg()
    workdir = Path(args.logs or tempfile.mkdtemp(prefix="overview-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"Log of the stack and the app: {workdir / 'stack.log'}", file=sys.stderr)
    with stack_process(None, workdir / "stack.log") as stack:
        ready = stack.ready
        print(
            f"Seeding {args.orders} orders and {args.sessions} failed sessions...",
            file=sys.stderr,
        )
        seeded = seed(ready["storage"], args.orders, args.sessions)
        print(f"Seeded in {seeded:.0f} s; timing GET /api/overview...", file=sys.stderr)
        _, answer = get_overview(ready["api_url"], ready["key"])  # warm-up
        before = stack.cpu()
        times = [get_overview(ready["api_url"], ready["key"])[0] for _ in range(args.requests)]
        after = stack.cpu()
        by_group, _ = cpu_used(before, after)
        reads = time_reads(ready["storage"], ready["servicebus"])
    load_after = os.getloadavg()

    times.sort()
    p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
    orders = answer["orders"]
    print(
        f"{cores()} cores; load average {load_before[0]:.1f} before, {load_after[0]:.1f} after "
        "(1 min)\n"
    )
    print(f"Store: {args.orders} orders, {args.sessions} failed sessions\n")
    print("| GET /api/overview | value |")
    print("|---|---|")
    print(f"| requests (one at a time) | {len(times)} |")
    print(f"| median | {statistics.median(times) * 1000:.0f} ms |")
    print(f"| p95 | {p95 * 1000:.0f} ms |")
    print(f"| slowest | {times[-1] * 1000:.0f} ms |")
    print(f"| host + app CPU per request | {by_group[HOST] / len(times) * 1000:.0f} ms |")
    print(
        "| the answer | orders in flight {in_flight}, completed {completed}, failed {failed}; "
        "failed sessions {f}, replayed {r}, resolved {s} |".format(
            **orders,
            f=answer["failed_sessions"],
            r=answer["replayed_sessions"],
            s=answer["resolved_sessions"],
        )
    )
    print("\n| each read, alone, in this process | ms |")
    print("|---|---|")
    for name, seconds in reads:
        print(f"| {name} | {seconds * 1000:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
