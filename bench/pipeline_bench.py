"""Orders end to end on the local stack, and a product import end to end.

``.venv/bin/python -m bench.pipeline_bench`` (``--orders N --slots 8,1 --instances 1,2
--tracing off,on --import-rows R``).

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
shipped (12 session slots) and with ``maxConcurrentSessions`` 1 (the only change), each on a
fresh stack.

Instances (``--instances 1,2``): the orders of each run with that many instances of the app on
the stack (``run_stack(instances=N)``, as Azure scales out); the POSTs go to the first
instance (there is no load balancer), the sessions spread over all of them. It reports the
orders/s of N instances against one, with the load average before and after.

Tracing (``--tracing off,on``): each of those runs with the app exporting nothing and with it
exporting its traces, metrics and logs over OTLP/HTTP to a receiver this process starts
(``bench.tracing``), each on a fresh stack. For the pair it reports orders/s and CPU per order
off and on, their ratio, and what reached the receiver (spans per order, by name).

Import: on a fresh stack, the Spark job is run as the README's command (local[2]) on a
catalogue of R rows in 8 sessions, and the run ends when ``GET /api/imports/{job_id}`` reports
every row imported: rows/s from the command's start.

Floor (``--floor-orders N``, after the orders): ``bench.order_floor`` makes the SDK calls an
order needs directly from this process, on a stack of its own, and each orders run's CPU per
order is reported against that floor.

Everything binds 127.0.0.1; every run is bounded by ``--timeout``. Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from bench.order_floor import Floor, floor_table, measure_floor
from bench.proc import cores
from bench.stack_client import (
    HOST,
    IMPORT_QUEUE,
    ROOT,
    cpu_used,
    fresh_path,
    percentile,
    post,
    seconds,
    seed_catalogue,
    stack_process,
)
from bench.tracing import EXPORT_DRAIN_SECONDS, MODES, Exported, Tracing, tracing
from functions_local_host.config import load_host_json
from localdev.stack_layout import HOST_JSON
from spark_jobs.product_import.columns import FIELDS


@dataclass(frozen=True)
class OrdersRun:
    slots: str
    instances: int
    tracing: str  # "off" or "on"
    orders: int
    mailed: int
    seconds: float
    latencies: list[float]
    alone: list[float]
    cpu: dict[str, float]
    busiest_cpu: float  # of the one process that used the most
    client_cpu: float
    drained_cpu: dict[str, float]  # until EXPORT_DRAIN_SECONDS after the last receipt
    exported: Exported | None  # what reached the OTLP receiver, when tracing is on

    @property
    def rate(self) -> float:
        return self.mailed / self.seconds if self.seconds else 0.0

    def drained_cpu_per_order(self, group: str | None = None) -> float:
        """CPU per order of ``group`` (all when None), the export after the last receipt in."""
        used = sum(self.drained_cpu.values()) if group is None else self.drained_cpu[group]
        return used / self.mailed if self.mailed else 0.0

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
    slots: int | None,
    instances: int,
    mode: str,
    orders: int,
    warmup: int,
    clients: int,
    timeout: float,
    workdir: Path,
) -> OrdersRun:
    """``slots`` None: host.json as shipped; else maxConcurrentSessions ``slots``. ``mode``:
    tracing off or on (``bench.tracing``)."""
    label = f"{shipped_slots()} (host.json as shipped)" if slots is None else str(slots)
    log = fresh_path(
        workdir, f"orders-{slots or 'shipped'}-{instances}-instances-tracing-{mode}", ".log"
    )
    print(
        f"-- orders, session slots: {label}, instances: {instances}, tracing {mode}; the "
        f"stack's log: {log} (instance 2 and later: host-<n>.log in the stack's log folder)",
        file=sys.stderr,
    )
    with tracing(mode) as switch:
        return _orders(
            switch, slots, instances, label, orders, warmup, clients, timeout, workdir, log
        )


def _orders(
    switch: Tracing,
    slots: int | None,
    instances: int,
    label: str,
    orders: int,
    warmup: int,
    clients: int,
    timeout: float,
    workdir: Path,
    log: Path,
) -> OrdersRun:
    with stack_process(slots, log, switch.environ, instances=instances) as stack:
        deadline = time.monotonic() + timeout
        seed_catalogue(stack, workdir, deadline)
        api, run_id = stack.api, f"bench-{uuid.uuid4().hex[:8]}"
        alone = []
        for index in range(warmup):  # one at a time: the latency of an order alone
            job_id, started = post(api, f"{run_id}-warm", index)
            mailed = stack.wait_for_receipts([job_id], deadline)
            if job_id in mailed:
                alone.append(mailed[job_id] - started)
        switch.mark()
        cpu_before, client_before = stack.cpu(), time.process_time()
        started = time.time()
        with ThreadPoolExecutor(max_workers=clients) as pool:
            posted = list(pool.map(lambda i: post(api, run_id, i), range(orders)))
        mailed = stack.wait_for_receipts([job_id for job_id, _ in posted], deadline)
        cpu_after, client_after = stack.cpu(), time.process_time()
        time.sleep(EXPORT_DRAIN_SECONDS)
        drained, _ = cpu_used(cpu_before, stack.cpu())
        exported = switch.exported(list(mailed), len(mailed))
    latencies = sorted(mailed[job_id] - at for job_id, at in posted if job_id in mailed)
    last = max(mailed.values(), default=started)
    cpu, busiest = cpu_used(cpu_before, cpu_after)
    return OrdersRun(
        slots=label,
        instances=instances,
        tracing=switch.mode,
        orders=orders,
        mailed=len(mailed),
        seconds=last - started,
        latencies=latencies,
        alone=alone,
        cpu=cpu,
        busiest_cpu=busiest,
        client_cpu=client_after - client_before,
        drained_cpu=drained,
        exported=exported,
    )


@dataclass(frozen=True)
class ImportRun:
    rows: int
    sessions: int
    instances: int
    imported: int
    job_seconds: float
    first_sent: float  # seconds from the command's start to the job's first send
    seconds: float
    cpu: dict[str, float]
    busiest_cpu: float  # of the one process of the stack that used the most
    spark_cpu: float

    @property
    def rate(self) -> float:
        """Rows imported a second from the command's start (the JVM's start included)."""
        return self.imported / self.seconds if self.seconds else 0.0

    @property
    def job_rate(self) -> float:
        """The Spark job's own rate: rows over its wall time, the JVM's start included."""
        return self.rows / self.job_seconds if self.job_seconds else 0.0

    @property
    def import_rate(self) -> float:
        """Rows imported a second from the job's first send to the last row imported: what
        the app does with the rows once they come."""
        window = self.seconds - self.first_sent
        return self.imported / window if window > 0 else 0.0


def run_import(
    rows: int, sessions: int, instances: int, timeout: float, workdir: Path
) -> ImportRun:
    log = workdir / f"import-{instances}.log"
    print(
        f"-- import of {rows:,} rows, {instances} instance(s); the stack's log: {log}",
        file=sys.stderr,
    )
    path = workdir / "bench-import.csv"
    with path.open("w", encoding="utf-8") as out:
        out.write(",".join(FIELDS) + "\n")
        for i in range(1, rows + 1):
            out.write(f"IMP-{i:07d},Product {i},{1 + i % 500}.{i % 100:02d},EUR,row {i}\n")
    job_id = f"bench-import-{uuid.uuid4().hex[:8]}"
    with stack_process(None, log, instances=instances) as stack:
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
        started, started_wall = time.monotonic(), time.time()
        spark_log_path = workdir / f"spark-{instances}.log"
        with spark_log_path.open("w") as spark_log:
            job = subprocess.Popen(command, cwd=ROOT, env=env, stdout=spark_log, stderr=spark_log)
            job_seconds, imported = 0.0, 0
            while time.monotonic() - started < timeout:
                if job_seconds == 0.0 and job.poll() is not None:
                    job_seconds = time.monotonic() - started
                    if job.returncode != 0:
                        raise RuntimeError(f"the Spark job failed; see {workdir / 'spark.log'}")
                # The status route reads every row's outcome (tens of microseconds of the
                # host's CPU per row and request): asked only once the queue is empty, so the
                # bench does not load the process it measures while the rows are imported.
                if job_seconds == 0.0 or stack.messages_left(IMPORT_QUEUE):
                    time.sleep(0.25)
                    continue
                status = api.import_status(job_id) or {}
                imported = int(status.get("rows_imported") or 0)
                if status.get("status") == "completed":
                    break
                time.sleep(0.25)
            seconds = time.monotonic() - started
            if not imported:  # timed out with rows still queued: how many made it
                imported = int((api.import_status(job_id) or {}).get("rows_imported") or 0)
            if job.poll() is None:
                job.kill()
            job.wait()
        spark_after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu, busiest = cpu_used(cpu_before, stack.cpu())
    path.unlink()
    return ImportRun(
        rows=rows,
        sessions=sessions,
        instances=instances,
        imported=imported,
        job_seconds=job_seconds,
        first_sent=first_send(spark_log_path, started_wall),
        seconds=seconds,
        cpu=cpu,
        busiest_cpu=busiest,
        spark_cpu=(spark_after.ru_utime + spark_after.ru_stime)
        - (spark_before.ru_utime + spark_before.ru_stime),
    )


_SENT = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) INFO .* to send in \d+ sessions")


def first_send(spark_log: Path, started_wall: float) -> float:
    """Seconds from the command's start to the job's first send: the time of the line it logs
    once the rows are read and before it sends them (``... N to send in S sessions``), in
    local time."""
    for line in spark_log.read_text(errors="replace").splitlines():
        if match := _SENT.search(line):
            moment = datetime.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S")
            return moment.timestamp() + int(match.group(2)) / 1000 - started_wall
    return 0.0


def orders_table(runs: list[OrdersRun]) -> str:
    groups = [HOST, "emulator", "Azurite"]
    header = (
        "| session slots | instances | tracing | orders mailed | seconds | orders/s | "
        "latency p50 / p95 (s) | "
        "one order alone, p50 (s) | "
        + " | ".join(f"CPU/order {g} (ms)" for g in groups)
        + " | CPU/order total (ms) | CPU ceiling (orders/s) | achieved | "
        "busiest process's bound (orders/s) |"
    )
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for run in runs:
        lines.append(
            f"| {run.slots} | {run.instances} | {run.tracing} | {run.mailed} of {run.orders} | "
            f"{run.seconds:.1f} | "
            f"{run.rate:.2f} | {seconds(percentile(run.latencies, 0.5))} / "
            f"{seconds(percentile(run.latencies, 0.95))} | {seconds(percentile(run.alone, 0.5))} | "
            + " | ".join(f"{run.cpu_per_order(g) * 1000:.0f}" for g in groups)
            + f" | {run.total_cpu_per_order * 1000:.0f} | {run.ceiling:.1f} | "
            f"{run.rate / run.ceiling if run.ceiling else 0:.0%} | {run.process_bound:.1f} |"
        )
    return "\n".join(lines)


def tracing_table(runs: list[OrdersRun]) -> str:
    """Tracing off vs on for each session-slot setting run both ways (the first run of each)."""
    lines = [
        "| session slots | tracing | orders/s | CPU/order host + app (ms) | CPU/order total (ms) "
        "| spans/order | log records/order, all (in the orders' traces) | OTLP requests "
        "| OTLP KB/order |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for off, on in tracing_pairs(runs):
        for run in (off, on):
            exported = run.exported
            lines.append(
                f"| {run.slots} | {run.tracing} | {run.rate:.2f} | "
                f"{run.drained_cpu_per_order(HOST) * 1000:.0f} | "
                f"{run.drained_cpu_per_order() * 1000:.0f} | "
                + (
                    f"{exported.per_order(exported.spans):.2f} | "
                    f"{exported.per_order(exported.log_records):.2f} "
                    f"({exported.per_order(exported.log_records_in_traces):.2f}) | "
                    f"{exported.requests} | "
                    f"{exported.per_order(exported.kilobytes):.1f} |"
                    if exported
                    else "- | - | - | - |"
                )
            )
        lines.append(
            f"| {on.slots} | **on / off** | **{ratio(on.rate, off.rate)}** | "
            f"**{ratio(on.drained_cpu_per_order(HOST), off.drained_cpu_per_order(HOST))}** | "
            f"**{ratio(on.drained_cpu_per_order(), off.drained_cpu_per_order())}** | | | | |"
        )
    return "\n".join(lines)


def tracing_pairs(runs: list[OrdersRun]) -> list[tuple[OrdersRun, OrdersRun]]:
    pairs = []
    for slots in dict.fromkeys(run.slots for run in runs):
        off = next((r for r in runs if r.slots == slots and r.tracing == "off"), None)
        on = next((r for r in runs if r.slots == slots and r.tracing == "on"), None)
        if off and on:
            pairs.append((off, on))
    return pairs


def ratio(numerator: float, denominator: float) -> str:
    return f"{numerator / denominator:.2f}" if denominator else "n/a"


def import_table(runs: list[ImportRun]) -> str:
    lines = [
        "| instances | rows | sessions | Spark job (s) | first row sent (s) | "
        "until all imported (s) | rows/s from the start | rows/s from the first send | "
        "Spark job's rows/s | CPU/row host + app, emulator, Azurite, Spark job (ms) | "
        "busiest process's bound (rows/s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        per_row = {g: cpu / max(run.imported, 1) * 1e3 for g, cpu in run.cpu.items()}
        lines.append(
            f"| {run.instances} | {run.imported:,} of {run.rows:,} | {run.sessions} | "
            f"{run.job_seconds:.1f} | {run.first_sent:.1f} | {run.seconds:.1f} | "
            f"{run.rate:.0f} | {run.import_rate:.0f} | {run.job_rate:.0f} | "
            f"{per_row[HOST]:.2f}, {per_row['emulator']:.2f}, {per_row['Azurite']:.2f}, "
            f"{run.spark_cpu / max(run.imported, 1) * 1e3:.2f} | "
            f"{run.imported / run.busiest_cpu if run.busiest_cpu else 0:.0f} |"
        )
    return "\n".join(lines)


def print_import_summary(runs: list[ImportRun]) -> None:
    for run in runs:
        print(
            f"- {run.instances} instance(s): import end to end / the Spark job's own rate: "
            f"{ratio(run.rate, run.job_rate)} (goal: at least 0.8); rows/s from the first "
            f"send {run.import_rate:.0f}, from the start {run.rate:.0f} (goal: at least 300)"
        )
    one = next((r for r in runs if r.instances == 1), None)
    for run in runs:
        if one and run.instances > 1:
            print(
                f"- {run.instances} instances / 1, import rows/s from the first send: "
                f"{ratio(run.import_rate, one.import_rate)} (goal: at least 1.8 with 2)"
            )


def print_orders_summary(runs: list[OrdersRun]) -> None:
    for single in (r for r in runs if r.instances == 1):
        for scaled in runs:
            if (scaled.slots, scaled.tracing) == (single.slots, single.tracing) and (
                scaled.instances > 1
            ):
                print(
                    f"- {scaled.instances} instances / 1, session slots {single.slots}, "
                    f"tracing {single.tracing}: orders/s {ratio(scaled.rate, single.rate)} "
                    f"(goal: at least 1.8 with 2)"
                )
    shipped = next((r for r in runs if "as shipped" in r.slots and r.instances == 1), None)
    if shipped:
        one = next(
            (
                r
                for r in runs
                if r.slots == "1" and r.tracing == shipped.tracing and r.instances == 1
            ),
            None,
        )
        print(f"- orders/s with host.json as shipped: {shipped.rate:.2f} (goal: at least 10)")
        print(
            f"- achieved fraction of the CPU ceiling: {shipped.rate / shipped.ceiling:.0%}"
            if shipped.ceiling
            else "- CPU ceiling: no order completed"
        )
        if one and one.rate:
            print(f"- 8 slots / 1 slot: {shipped.rate / one.rate:.1f}x (goal: at least 5x)")
    for run in runs:
        client = run.client_cpu / max(run.mailed, 1) * 1e3
        print(
            f"- the load generator (this process) used {client:.0f} ms of CPU per order in "
            f"the {run.slots} run with tracing {run.tracing} (with it on, this includes the "
            "OTLP receiver's decoding), outside the figures above"
        )
    print()
    if not tracing_pairs(runs):
        return
    print(tracing_table(runs) + "\n")
    for off, on in tracing_pairs(runs):
        exported = on.exported
        assert exported is not None  # tracing on
        host_on, host_off = on.drained_cpu_per_order(HOST), off.drained_cpu_per_order(HOST)
        print(
            f"- {on.slots}: tracing on / off, orders/s {ratio(on.rate, off.rate)}, CPU per order "
            f"of host + app {ratio(host_on, host_off)} ({(host_on - host_off) * 1e3:+.0f} ms); "
            f"spans per order by name: {per_order(exported, exported.by_name)}; log records "
            f"per order by logger: {per_order(exported, exported.by_logger)}"
        )
    print()


def print_floor(floor: Floor, runs: list[OrdersRun]) -> None:
    print(floor_table(floor) + "\n")
    for run in runs:
        if run.mailed:
            print(
                f"- {run.slots}, {run.instances} instance(s), tracing {run.tracing}: the "
                f"pipeline's CPU per order {run.total_cpu_per_order * 1e3:.0f} ms, "
                f"{ratio(run.total_cpu_per_order, floor.cpu_per_order())} the floor's "
                f"{floor.cpu_per_order() * 1e3:.0f} ms (goal: at most 2x)"
            )
    print()


def per_order(exported: Exported, counts: dict[str, int]) -> str:
    found = sorted(counts.items(), key=lambda item: -item[1])
    return ", ".join(f"{name} {exported.per_order(n):.2f}" for name, n in found) or "none"


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
    parser.add_argument(
        "--instances",
        default="1",
        help="one run each (for each --slots): N instances of the app on the stack, e.g. 1,2",
    )
    parser.add_argument(
        "--tracing",
        default="off",
        help="one run each (for each --slots): off = nothing exported, on = traces, metrics "
        "and logs over OTLP/HTTP to a receiver the bench starts",
    )
    parser.add_argument(
        "--floor-orders", type=int, default=50, help="orders of the floor (0: no floor)"
    )
    parser.add_argument("--import-rows", type=int, default=20_000, help="0: no import run")
    parser.add_argument("--import-sessions", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=900.0, help="per run, seconds")
    parser.add_argument("--logs", default=None, help="where the logs go (default: a new temp dir)")
    args = parser.parse_args(argv)
    slots = [None if s.strip() == "shipped" else int(s) for s in args.slots.split(",")]
    modes = [m.strip() for m in args.tracing.split(",")]
    if unknown := sorted(set(modes) - set(MODES)):
        parser.error(f"--tracing takes {', '.join(MODES)}, not {', '.join(unknown)}")

    load_before = os.getloadavg()
    workdir = Path(args.logs or tempfile.mkdtemp(prefix="pipeline-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"Logs of the stack, the app and the Spark job: {workdir}", file=sys.stderr)
    instances = [int(n) for n in args.instances.split(",")]
    runs = [
        run_orders(s, n, mode, args.orders, args.warmup, args.clients, args.timeout, workdir)
        for s in (slots if args.orders else [])
        for n in instances
        for mode in modes
    ]
    floor = measure_floor(args.floor_orders, workdir) if args.floor_orders else None
    imported = [
        run_import(args.import_rows, args.import_sessions, n, args.timeout, workdir)
        for n in (instances if args.import_rows else [])
    ]
    load_after = os.getloadavg()

    print(
        f"{cores()} cores; load average {load_before[0]:.1f} before, {load_after[0]:.1f} after "
        "(1 min)\n"
    )
    if runs:
        print(orders_table(runs) + "\n")
        print_orders_summary(runs)
    if floor:
        print_floor(floor, runs)
    if imported:
        print(import_table(imported) + "\n")
        print_import_summary(imported)
    return 0


if __name__ == "__main__":
    sys.exit(main())
