"""Orders end to end on the local stack, and a product import end to end.

``.venv/bin/python -m bench.pipeline_bench`` (``--orders N --slots 8,1 --import-rows R``).

Orders: the stack of ``make up`` (Azurite, the project's Service Bus emulator, the SMTP sink,
the local host running function_app.py with host.json as shipped) runs in a process of its
own (``bench.stack_process``). A small catalogue is imported through the import queue, a few
warm-up orders go through one at a time (their latency is that of an order alone), then N
single-line orders are posted to ``POST /api/orders`` by 8 client threads at once, and the
run ends when the sink has received every receipt. It reports orders/s, the latency from each
POST to its receipt e-mail (p50, p95; under this burst it includes the wait for a session
slot), the CPU seconds per order of each process (``/proc/<pid>/stat``: host + app, emulator,
Azurite), the CPU ceiling (cores / CPU per order: the orders/s this machine could reach if
CPU were the only limit) and the fraction of it achieved. It does so with host.json as
shipped (8 session slots) and with ``maxConcurrentSessions`` 1 (the only change), each on a
fresh stack.

Import: on a fresh stack, the Spark job is run as the README's command (local[2]) on a
catalogue of R rows in 8 sessions, and the run ends when ``GET /api/imports/{job_id}`` reports
every row imported: rows/s from the command's start.

Everything binds 127.0.0.1; every run is bounded by ``--timeout``. Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from bench.proc import cpu_by_process
from localdev.api_client import AppClient
from localdev.demo.catalogue import import_through_queue
from localdev.host.config import load_host_json
from localdev.stack_layout import HOST_JSON
from spark_jobs.product_import.columns import FIELDS

ROOT = Path(__file__).resolve().parents[1]
IMPORT_QUEUE = "product-import-tasks"
PROCESS_GROUPS = {
    "emulator": lambda command: "servicebus_emulator" in command,
    "Azurite": lambda command: "azurite" in command,
}
HOST = "host + app"
CATALOGUE_SKUS = [f"BENCH-{i:02d}" for i in range(1, 9)]


def cores() -> int:
    return len(os.sched_getaffinity(0))


@dataclass
class Stack:
    """A running ``bench.stack_process``: its API, and the receipts its sink has received."""

    process: subprocess.Popen[str]
    ready: dict[str, Any]
    mails: dict[str, float] = field(default_factory=dict)
    arrived: threading.Condition = field(default_factory=threading.Condition)

    @property
    def api(self) -> AppClient:
        return AppClient(self.ready["api_url"], self.ready["key"])

    def cpu(self) -> dict[int, tuple[str, float]]:
        """CPU seconds so far of each process of the stack, with its group."""
        return cpu_by_process(self.ready["pid"], PROCESS_GROUPS, HOST)

    def read(self, stdout: IO[str]) -> None:
        for line in stdout:
            if not line.startswith("{"):
                continue
            event = json.loads(line)
            if "mail" in event:
                with self.arrived:
                    self.mails[event["mail"].strip("<> ")] = float(event["time"])
                    self.arrived.notify_all()

    def wait_for_receipts(self, job_ids: list[str], deadline: float) -> dict[str, float]:
        """Receipt time (time.time()) of each job mailed by ``deadline`` (time.monotonic())."""
        wanted = {f"{job_id}.receipt@pipelines.local": job_id for job_id in job_ids}
        with self.arrived:
            while not wanted.keys() <= self.mails.keys():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.arrived.wait(min(left, 1.0))
            return {job_id: self.mails[m] for m, job_id in wanted.items() if m in self.mails}


def cpu_used(
    before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]
) -> tuple[dict[str, float], float]:
    """CPU seconds used between two readings, by group, and by the busiest single process."""
    by_group = dict.fromkeys([*PROCESS_GROUPS, HOST], 0.0)
    busiest = 0.0
    for pid, (group, seconds) in after.items():
        used = seconds - before.get(pid, (group, 0.0))[1]
        by_group[group] += used
        busiest = max(busiest, used)
    for pid, (group, seconds) in before.items():
        if pid not in after:  # ended: its parent has counted all of its time since
            by_group[group] -= seconds
    return by_group, busiest


@contextmanager
def stack_process(max_concurrent_sessions: int | None, log: Path) -> Iterator[Stack]:
    command = [sys.executable, "-m", "bench.stack_process", "--log", str(log)]
    if max_concurrent_sessions is not None:
        command += ["--max-concurrent-sessions", str(max_concurrent_sessions)]
    process = subprocess.Popen(
        command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stdin is not None
    try:
        line = process.stdout.readline()
        while line and not line.startswith('{"ready"'):
            line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"the stack did not start (exit code {process.wait()}); see {log}")
        stack = Stack(process, json.loads(line)["ready"])
        reader = threading.Thread(target=stack.read, args=(process.stdout,), daemon=True)
        reader.start()
        yield stack
    finally:
        process.stdin.close()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def seed_catalogue(stack: Stack, workdir: Path, deadline: float) -> None:
    """The products the orders buy, imported through the import queue by the app."""
    path = workdir / "bench-catalogue.csv"
    lines = [",".join(FIELDS)] + [
        f"{sku},Bench product {i},{5 + i}.50,EUR,for the benchmark"
        for i, sku in enumerate(CATALOGUE_SKUS)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    job_id = f"bench-catalogue-{uuid.uuid4().hex[:8]}"
    import_through_queue(
        path,
        job_id=job_id,
        queue=IMPORT_QUEUE,
        sessions=1,
        servicebus_connection_string=stack.ready["servicebus"],
    )
    status: dict[str, Any] | None = None
    while time.monotonic() < deadline:
        status = stack.api.import_status(job_id)
        if status and status["rows_imported"] == len(CATALOGUE_SKUS):
            return
        time.sleep(0.2)
    raise RuntimeError(f"the catalogue was not imported in time: {status}")


def order(index: int) -> dict[str, Any]:
    return {
        "customer_email": f"bench-{index}@example.com",
        "customer_name": f"Bench Customer {index}",
        "card_token": f"tok_visa_{4000 + index}",
        "currency": "EUR",
        "lines": [{"sku": CATALOGUE_SKUS[index % len(CATALOGUE_SKUS)], "quantity": 1}],
    }


def post(api: AppClient, run_id: str, index: int) -> tuple[str, float]:
    """POST one order: its job id and when the POST started (time.time())."""
    started = time.time()
    answer = api.submit_order(order(index), idempotency_key=f"{run_id}-{index}")
    return str(answer["job_id"]), started


@dataclass(frozen=True)
class OrdersRun:
    slots: str
    orders: int
    mailed: int
    seconds: float
    latencies: list[float]
    alone: list[float]
    cpu: dict[str, float]
    busiest_cpu: float  # of the one process that used the most
    client_cpu: float

    @property
    def rate(self) -> float:
        return self.mailed / self.seconds if self.seconds else 0.0

    def cpu_per_order(self, group: str) -> float:
        return self.cpu[group] / self.mailed if self.mailed else 0.0

    @property
    def total_cpu_per_order(self) -> float:
        return sum(self.cpu.values()) / self.mailed if self.mailed else 0.0

    @property
    def ceiling(self) -> float:
        return cores() / self.total_cpu_per_order if self.total_cpu_per_order else 0.0

    @property
    def process_bound(self) -> float:
        """Orders/s if the busiest process had a core to itself: a Python or Node process
        runs its code on one core at a time."""
        return self.mailed / self.busiest_cpu if self.busiest_cpu else 0.0


def shipped_slots() -> int:
    return int(load_host_json(HOST_JSON)["extensions"]["serviceBus"]["maxConcurrentSessions"])


def run_orders(
    slots: int | None, orders: int, warmup: int, clients: int, timeout: float, workdir: Path
) -> OrdersRun:
    """``slots`` None: host.json as shipped; else maxConcurrentSessions ``slots``."""
    label = f"{shipped_slots()} (host.json as shipped)" if slots is None else str(slots)
    log = workdir / f"orders-{slots or 'shipped'}.log"
    print(f"-- orders, session slots: {label}; the stack's log: {log}", file=sys.stderr)
    with stack_process(slots, log) as stack:
        deadline = time.monotonic() + timeout
        seed_catalogue(stack, workdir, deadline)
        api, run_id = stack.api, f"bench-{uuid.uuid4().hex[:8]}"
        alone = []
        for index in range(warmup):  # one at a time: the latency of an order alone
            job_id, started = post(api, f"{run_id}-warm", index)
            mailed = stack.wait_for_receipts([job_id], deadline)
            if job_id in mailed:
                alone.append(mailed[job_id] - started)
        cpu_before, client_before = stack.cpu(), time.process_time()
        started = time.time()
        with ThreadPoolExecutor(max_workers=clients) as pool:
            posted = list(pool.map(lambda i: post(api, run_id, i), range(orders)))
        mailed = stack.wait_for_receipts([job_id for job_id, _ in posted], deadline)
        cpu_after, client_after = stack.cpu(), time.process_time()
    latencies = sorted(mailed[job_id] - at for job_id, at in posted if job_id in mailed)
    last = max(mailed.values(), default=started)
    cpu, busiest = cpu_used(cpu_before, cpu_after)
    return OrdersRun(
        slots=label,
        orders=orders,
        mailed=len(mailed),
        seconds=last - started,
        latencies=latencies,
        alone=alone,
        cpu=cpu,
        busiest_cpu=busiest,
        client_cpu=client_after - client_before,
    )


@dataclass(frozen=True)
class ImportRun:
    rows: int
    sessions: int
    imported: int
    job_seconds: float
    seconds: float
    cpu: dict[str, float]
    busiest_cpu: float  # of the one process of the stack that used the most
    spark_cpu: float

    @property
    def rate(self) -> float:
        return self.imported / self.seconds if self.seconds else 0.0


def run_import(rows: int, sessions: int, timeout: float, workdir: Path) -> ImportRun:
    log = workdir / "import.log"
    print(f"-- import of {rows:,} rows; the stack's log: {log}", file=sys.stderr)
    path = workdir / "bench-import.csv"
    with path.open("w", encoding="utf-8") as out:
        out.write(",".join(FIELDS) + "\n")
        for i in range(1, rows + 1):
            out.write(f"IMP-{i:07d},Product {i},{1 + i % 500}.{i % 100:02d},EUR,row {i}\n")
    job_id = f"bench-import-{uuid.uuid4().hex[:8]}"
    with stack_process(None, log) as stack:
        env = {
            **os.environ,
            "ServiceBusConnection": stack.ready["servicebus"],
            "AzureWebJobsStorage": stack.ready["storage"],
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
        command = [
            sys.executable, "-m", "spark_jobs.product_import", "--input", str(path),
            "--format", "csv", "--job-id", job_id, "--sessions", str(sessions),
            "--queue", IMPORT_QUEUE, "--connection-setting", "ServiceBusConnection",
            "--storage-setting", "AzureWebJobsStorage", "--master", "local[2]",
        ]  # fmt: skip
        api = stack.api
        cpu_before = stack.cpu()
        spark_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        with (workdir / "spark.log").open("w") as spark_log:
            job = subprocess.Popen(command, cwd=ROOT, env=env, stdout=spark_log, stderr=spark_log)
            job_seconds, imported = 0.0, 0
            while time.monotonic() - started < timeout:
                if job_seconds == 0.0 and job.poll() is not None:
                    job_seconds = time.monotonic() - started
                    if job.returncode != 0:
                        raise RuntimeError(f"the Spark job failed; see {workdir / 'spark.log'}")
                status = api.import_status(job_id) or {}
                imported = int(status.get("rows_imported") or 0)
                if status.get("status") == "completed":
                    break
                time.sleep(0.25)
            seconds = time.monotonic() - started
            if job.poll() is None:
                job.kill()
            job.wait()
        spark_after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu, busiest = cpu_used(cpu_before, stack.cpu())
    path.unlink()
    return ImportRun(
        rows=rows,
        sessions=sessions,
        imported=imported,
        job_seconds=job_seconds,
        seconds=seconds,
        cpu=cpu,
        busiest_cpu=busiest,
        spark_cpu=(spark_after.ru_utime + spark_after.ru_stime)
        - (spark_before.ru_utime + spark_before.ru_stime),
    )


def percentile(values: list[float], share: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(share * 100) - 1]


def seconds(value: float) -> str:
    return "n/a" if value != value else f"{value:.2f}"  # NaN: nothing measured


def orders_table(runs: list[OrdersRun]) -> str:
    groups = [HOST, "emulator", "Azurite"]
    header = (
        "| session slots | orders mailed | seconds | orders/s | latency p50 / p95 (s) | "
        "one order alone, p50 (s) | "
        + " | ".join(f"CPU/order {g} (ms)" for g in groups)
        + " | CPU/order total (ms) | CPU ceiling (orders/s) | achieved | "
        "busiest process's bound (orders/s) |"
    )
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for run in runs:
        lines.append(
            f"| {run.slots} | {run.mailed} of {run.orders} | {run.seconds:.1f} | "
            f"{run.rate:.2f} | {seconds(percentile(run.latencies, 0.5))} / "
            f"{seconds(percentile(run.latencies, 0.95))} | {seconds(percentile(run.alone, 0.5))} | "
            + " | ".join(f"{run.cpu_per_order(g) * 1000:.0f}" for g in groups)
            + f" | {run.total_cpu_per_order * 1000:.0f} | {run.ceiling:.1f} | "
            f"{run.rate / run.ceiling if run.ceiling else 0:.0%} | {run.process_bound:.1f} |"
        )
    return "\n".join(lines)


def import_table(run: ImportRun) -> str:
    per_row = {g: cpu / max(run.imported, 1) * 1e3 for g, cpu in run.cpu.items()}
    return "\n".join(
        [
            "| rows | sessions | Spark job (s) | until all imported (s) | rows/s | "
            "CPU/row host + app, emulator, Azurite, Spark job (ms) | "
            "busiest process's bound (rows/s) |",
            "|---|---|---|---|---|---|---|",
            f"| {run.imported:,} of {run.rows:,} | {run.sessions} | {run.job_seconds:.1f} | "
            f"{run.seconds:.1f} | {run.rate:.0f} | {per_row[HOST]:.2f}, "
            f"{per_row['emulator']:.2f}, {per_row['Azurite']:.2f}, "
            f"{run.spark_cpu / max(run.imported, 1) * 1e3:.2f} | "
            f"{run.imported / run.busiest_cpu if run.busiest_cpu else 0:.0f} |",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pipeline_bench", description=__doc__)
    parser.add_argument("--orders", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=5, help="orders sent one at a time first")
    parser.add_argument("--clients", type=int, default=8, help="threads posting orders")
    parser.add_argument(
        "--slots",
        default="shipped,1",
        help="one run each: shipped = host.json as shipped, N = maxConcurrentSessions N",
    )
    parser.add_argument("--import-rows", type=int, default=20_000, help="0: no import run")
    parser.add_argument("--import-sessions", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=900.0, help="per run, seconds")
    parser.add_argument("--logs", default=None, help="where the logs go (default: a new temp dir)")
    args = parser.parse_args(argv)
    slots = [None if s.strip() == "shipped" else int(s) for s in args.slots.split(",")]

    load_before = os.getloadavg()
    workdir = Path(args.logs or tempfile.mkdtemp(prefix="pipeline-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"Logs of the stack, the app and the Spark job: {workdir}", file=sys.stderr)
    runs = [
        run_orders(s, args.orders, args.warmup, args.clients, args.timeout, workdir)
        for s in (slots if args.orders else [])
    ]
    imported = (
        run_import(args.import_rows, args.import_sessions, args.timeout, workdir)
        if args.import_rows
        else None
    )
    load_after = os.getloadavg()

    print(
        f"{cores()} cores; load average {load_before[0]:.1f} before, {load_after[0]:.1f} after "
        "(1 min)\n"
    )
    if runs:
        print(orders_table(runs) + "\n")
        shipped = next((r for r in runs if "as shipped" in r.slots), None)
        one = next((r for r in runs if r.slots == "1"), None)
        if shipped:
            print(f"- orders/s with host.json as shipped: {shipped.rate:.2f} (goal: at least 10)")
            print(
                f"- achieved fraction of the CPU ceiling: {shipped.rate / shipped.ceiling:.0%}"
                if shipped.ceiling
                else "- CPU ceiling: no order completed"
            )
        if shipped and one and one.rate:
            print(f"- 8 slots / 1 slot: {shipped.rate / one.rate:.1f}x (goal: at least 5x)")
        for run in runs:
            client = run.client_cpu / max(run.mailed, 1) * 1e3
            print(
                f"- the load generator (this process) used {client:.0f} ms of CPU per order in "
                f"the {run.slots} run, outside the figures above"
            )
        print()
    if imported:
        print(import_table(imported) + "\n")
        print(f"- import rows/s end to end: {imported.rate:.0f} (goal: at least 300)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
