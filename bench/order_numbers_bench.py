"""The order-number counter under contention, in both modes, against one Azurite.

``.venv/bin/python -m bench.order_numbers_bench`` (``--allocators 1,8,32,128 --seconds 3
--block-size 100 --processes 8``)

For each mode (gapless: ``TableOrderNumbers``; blocks: ``TableBlockOrderNumbers``) and each
number of concurrent allocators N, on a fresh table: N allocators, spread over up to
``--processes`` processes (threads within each), allocate numbers for distinct jobs, as fast
as they can, for ``--seconds`` from a common start. Reported: allocations per second (those
finished inside the window), lost races per allocation (Storage answers 409 or 412 to the
counter's conditional write, or a transaction that did not allocate: each one is a retry),
Storage requests per allocation (counting also those in flight when the window ended), the
allocations that gave up (the adapter's 200 attempts ran out). Afterwards every allocation
in the table is checked: no number twice.

Azurite runs on this machine, in one Node process: its single-entity rate is not Azure's. The
ratios between the rows (how the rate falls, how the retries grow, as allocators are added)
are what carries over; docs/capacity.md sets them against Azure's published targets.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODES = ("gapless", "blocks")


@dataclass(frozen=True)
class Run:
    mode: str
    allocators: int
    processes: int
    seconds: float
    allocations: int
    lost_races: int
    requests: int
    gave_up: int
    allocated: int  # the window's and those in flight when it ended

    @property
    def rate(self) -> float:
        return self.allocations / self.seconds

    def per_allocation(self, value: int) -> float:
        return value / self.allocated if self.allocated else float("nan")


def worker(argv: list[str]) -> int:
    """One allocator process: says ``ready`` once set up, reads the window's start and stop
    (time.time()) from stdin, and allocates in ``threads`` threads until it ends."""
    from azure.data.tables import TableClient

    from shared.adapters.table_order_numbers import TableBlockOrderNumbers, TableOrderNumbers
    from shared.domain.errors import TransientTaskError

    connection, table_name, mode, block = argv[0], argv[1], argv[2], int(argv[3])
    threads = int(argv[4])
    counts = {"allocations": 0, "lost_races": 0, "requests": 0, "gave_up": 0}
    transactions, allocated = [0], [0]
    lock = threading.Lock()

    def on_response(response: Any) -> None:
        with lock:
            counts["requests"] += 1
            if response.http_response.status_code in (409, 412):
                counts["lost_races"] += 1
            if response.http_request.url.endswith("$batch"):
                # A transaction answers 202 whether it failed or not: counted, and those that
                # did not allocate are the lost races (below).
                transactions[0] += 1

    table = TableClient.from_connection_string(
        connection, table_name, raw_response_hook=on_response
    )
    numbers: Any = (
        TableBlockOrderNumbers(table, block_size=block)
        if mode == "blocks"
        else TableOrderNumbers(table)
    )
    prefix = uuid.uuid4().hex[:8]
    print("ready", flush=True)
    start, stop = (float(value) for value in sys.stdin.readline().split())

    def run(thread: int) -> None:
        time.sleep(max(0.0, start - time.time()))
        i = 0
        while time.time() < stop:
            try:
                numbers.allocate(f"{prefix}-{thread}-{i}")
            except TransientTaskError:
                with lock:
                    counts["gave_up"] += 1
                continue
            finally:
                i += 1
            with lock:
                allocated[0] += 1
                if time.time() <= stop:
                    counts["allocations"] += 1

    pool = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    late = time.time() > start
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    if mode == "gapless":
        counts["lost_races"] += transactions[0] - allocated[0]
    counts["allocated"] = allocated[0]
    print(json.dumps({**counts, "late": late}), flush=True)
    return 0


def run(
    connection: str, mode: str, allocators: int, processes: int, seconds: float, block: int
) -> Run:
    from azure.data.tables import TableServiceClient

    service = TableServiceClient.from_connection_string(connection)
    name = f"bench{uuid.uuid4().hex[:12]}"
    service.create_table(name)
    count = min(processes, allocators)
    threads = [allocators // count + (1 if p < allocators % count else 0) for p in range(count)]
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "bench.order_numbers_bench", "--worker",
             connection, name, mode, str(block), str(n)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in threads
    ]  # fmt: skip
    for child in children:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    start = time.time() + 0.5
    for child in children:
        assert child.stdin is not None
        child.stdin.write(f"{start} {start + seconds}\n")
        child.stdin.flush()
    totals = {"allocations": 0, "lost_races": 0, "requests": 0, "gave_up": 0, "allocated": 0}
    for child in children:
        out, _ = child.communicate(timeout=seconds + 120)
        result = json.loads(out.strip().splitlines()[-1])
        if result.pop("late"):
            print(f"warning: a {mode} process started late", file=sys.stderr)
        for key in totals:
            totals[key] += result[key]
    check_unique(service.get_table_client(name))
    service.delete_table(name)
    return Run(mode, allocators, count, seconds, **totals)


def check_unique(table: Any) -> None:
    numbers = [row["OrderNumber"] for row in table.list_entities() if "OrderNumber" in row]
    if len(numbers) != len(set(numbers)):
        raise SystemExit("a number was allocated twice")


def report(runs: list[Run], block: int) -> str:
    lines = [
        "| mode | allocators (processes) | allocations/s | lost races per allocation "
        "| Storage requests per allocation | gave up |",
        "|---|---|---|---|---|---|",
    ]
    for r in runs:
        mode = f"blocks of {block}" if r.mode == "blocks" else r.mode
        lines.append(
            f"| {mode} | {r.allocators} ({r.processes}) | {r.rate:,.0f} "
            f"| {r.per_allocation(r.lost_races):.2f} | {r.per_allocation(r.requests):.2f} "
            f"| {r.gave_up} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        return worker(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--allocators", default="1,8,32,128")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--block-size", type=int, default=100)
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--modes", default=",".join(MODES))
    args = parser.parse_args(argv)
    from localdev.azurite import run_azurite

    load_before = os.getloadavg()
    runs = []
    with run_azurite() as azurite:
        for mode in args.modes.split(","):
            for allocators in (int(n) for n in args.allocators.split(",")):
                runs.append(
                    run(
                        azurite.connection_string,
                        mode,
                        allocators,
                        args.processes,
                        args.seconds,
                        args.block_size,
                    )
                )
    load_after = os.getloadavg()
    print(
        f"{len(os.sched_getaffinity(0))} cores; load average {load_before[0]:.2f} before, "
        f"{load_after[0]:.2f} after; {args.seconds:g} s per row, one Azurite (in memory)\n"
    )
    print(report(runs, args.block_size))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
