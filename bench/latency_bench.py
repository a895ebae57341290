"""Orders' latency under a steady load: what a shop's customers feel.

``.venv/bin/python -m bench.latency_bench`` (``--loads 0.25,0.5,0.8 --seconds 60 --schedule
poisson --capacity N --instances 1``).

The capacity first: unless ``--capacity`` gives it, a closed-loop burst of
``--capacity-orders`` orders by 8 clients on a fresh stack, as ``bench.pipeline_bench`` runs
it (host.json as shipped): its orders/s. Then, for each share of it, on a fresh stack of its
own (``bench.stack_process``: the stack of ``make up``), after a catalogue and a few orders
one at a time: orders posted to ``POST /api/orders`` at that rate for ``--seconds``, open loop
(``bench.open_loop``: each arrival at a time drawn in advance, Poisson by default, whatever
became of the earlier orders; a POST sent late is measured from its due time). The run
waits up to ``--drain`` seconds after the window for the orders still in flight.

Per load it reports the offered rate (arrivals over the window) and the rate sustained (receipt
e-mails arrived in the window over the window), the latency from each order's due time to its
receipt e-mail (the stack's Communication Services Email stand-in notes each as it arrives)
and to its completed status (``GET /api/orders/{job_id}``, asked from the moment its receipt
arrives and then every ``--status-poll`` seconds until it says completed: the time of that
answer, so at most one poll interval and one GET late), p50, p95, p99 by nearest rank (an
order never completed counts as slower than all), the CPU per order of the stack's processes
in the window (``/proc``), and the load average before and after. The figure that matters is
p99 at 50% of capacity.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from bench.open_loop import SCHEDULES, Arrival, Schedule, arrivals, nearest_rank, run_open_loop
from bench.pipeline_bench import run_orders
from bench.proc import cores, machine_line
from bench.stack_client import (
    HOST,
    Stack,
    cpu_used,
    fresh_path,
    order,
    post,
    seed_catalogue,
    stack_process,
)

MAX_SECONDS = 600.0  # per load: the bench stays bounded
GROUPS = (HOST, "emulator", "Azurite")


@dataclass
class LoadRun:
    share: float
    rate: float
    seconds: float
    schedule: str
    load: list[Arrival]
    receipts: dict[str, float]  # job id: when its receipt arrived (time.time())
    in_window: int  # receipts that arrived in the window
    followed: list[str]  # job ids whose status was asked for
    completed: dict[str, float]  # job id: when GET first answered completed
    cpu: dict[str, float]  # CPU seconds of the stack's processes in the window, by group
    load_average: tuple[float, float]
    status_gets: int

    def to_receipt(self) -> list[float]:
        """Of every order: from its due time to its receipt (inf: never mailed)."""
        return [self._since_due(a, self.receipts) for a in self.load]

    def to_completed(self) -> list[float]:
        """Of every order followed: from its due time to the GET that said completed."""
        followed = set(self.followed)
        return [self._since_due(a, self.completed) for a in self.load if a.job_id in followed]

    @staticmethod
    def _since_due(arrival: Arrival, done: dict[str, float]) -> float:
        if arrival.job_id is None or arrival.job_id not in done:
            return math.inf
        return done[arrival.job_id] - arrival.due

    def cpu_per_order(self, group: str | None = None) -> float:
        used = sum(self.cpu.values()) if group is None else self.cpu[group]
        return used / self.in_window if self.in_window else math.nan


@dataclass
class StatusPoller:
    """GET /api/orders/{job_id} of every ``every``-th order whose receipt arrives, from
    ``interval`` seconds after its receipt and then every ``interval`` seconds, until it answers
    completed or ``deadline`` (time.monotonic()) passes."""

    stack: Stack
    interval: float
    every: int = 1
    deadline: float = math.inf
    completed: dict[str, float] = field(default_factory=dict)
    followed: list[str] = field(default_factory=list)
    gets: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def follow(self, seen: int, stop: threading.Event) -> None:
        """Polls the orders whose receipts arrive after the first ``seen`` mails, until
        ``stop`` is set and no more has arrived, and every poll has ended."""
        with ThreadPoolExecutor(max_workers=8, thread_name_prefix="status") as pool:
            received = 0
            while True:
                mails = self.stack.mails_after(seen, timeout=0.2)
                if not mails and stop.is_set():
                    return
                seen += len(mails)
                for message_id, _ in mails:
                    received += 1
                    if received % self.every == 0:
                        job_id = message_id.split(".receipt@", 1)[0]
                        self.followed.append(job_id)
                        pool.submit(self._poll, job_id)

    def _poll(self, job_id: str) -> None:
        api = self.stack.api
        while time.monotonic() < self.deadline:
            time.sleep(self.interval)
            answer = api.request("GET", f"orders/{job_id}")
            with self._lock:
                self.gets += 1
            if answer.status == 200 and answer.json().get("status") == "completed":
                with self._lock:
                    self.completed[job_id] = time.time()
                return


def run_load(share: float, capacity: float, args: argparse.Namespace, workdir: Path) -> LoadRun:
    rate = share * capacity
    log = fresh_path(workdir, f"latency-{share:.0%}", ".log")
    print(
        f"-- {share:.0%} of capacity: {rate:.2f} orders/s; the stack's log: {log}", file=sys.stderr
    )
    offsets = arrivals(rate, args.seconds, args.schedule, args.seed)
    with stack_process(None, log, instances=args.instances) as stack:
        deadline = time.monotonic() + args.timeout
        seed_catalogue(stack, workdir, deadline)
        api, run_id = stack.api, f"latency-{uuid.uuid4().hex[:8]}"
        for index in range(args.warmup):  # one at a time: the stack warmed up, its caches full
            job_id, _ = post(api, f"{run_id}-warm", index)
            stack.wait_for_receipts([job_id], deadline)
        poller, stop = (
            StatusPoller(stack, args.status_poll, args.status_every),
            threading.Event(),
        )
        follower = threading.Thread(target=poller.follow, args=(len(stack.mails), stop))
        load_before, cpu_before = os.getloadavg()[0], stack.cpu()
        if args.status_poll > 0:
            follower.start()
        start = time.monotonic()
        with ThreadPoolExecutor(max_workers=1) as background:
            sending = background.submit(
                run_open_loop,
                offsets,
                lambda i: str(
                    api.submit_order(order(i), idempotency_key=f"{run_id}-{i}")["job_id"]
                ),
            )
            time.sleep(max(0.0, start + args.seconds - time.monotonic()))
            cpu, _ = cpu_used(cpu_before, stack.cpu())
            load = sending.result()
        poller.deadline = time.monotonic() + args.drain
        job_ids = [a.job_id for a in load if a.job_id]
        receipts = stack.wait_for_receipts(job_ids, poller.deadline)
        stop.set()
        if follower.is_alive():
            follower.join()
        load_after = os.getloadavg()[0]
    window_start = load[0].due - offsets[0] if load else time.time()
    return LoadRun(
        share=share,
        rate=rate,
        seconds=args.seconds,
        schedule=args.schedule,
        load=load,
        receipts=receipts,
        in_window=sum(window_start <= t <= window_start + args.seconds for t in receipts.values()),
        followed=poller.followed,
        completed=poller.completed,
        cpu=cpu,
        load_average=(load_before, load_after),
        status_gets=poller.gets,
    )


def figures(values: list[float]) -> str:
    return " / ".join(_seconds(nearest_rank(values, p)) for p in (0.5, 0.95, 0.99))


def _seconds(value: float) -> str:
    if value != value:  # NaN: nothing measured
        return "n/a"
    return "never" if value == math.inf else f"{value:.2f}"


def table(runs: list[LoadRun]) -> str:
    lines = [
        "| load | schedule | offered (orders/s) | sustained (orders/s) | sustained / offered | "
        "in flight at the window's end | mailed | POST to receipt p50 / p95 / p99 (s) | "
        "POST to completed status p50 / p95 / p99 (s) | POST answered p50 / p99 (s) | "
        "sent late p99 (s) | orders followed to completed (GETs each) | "
        "CPU/order host + app / emulator / Azurite / total (ms) | CPU busy (of the cores) | "
        "load average before / after |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        offered = len(run.load) / run.seconds
        answered = [a.answered - a.due if a.job_id else math.inf for a in run.load]
        late = [a.sent - a.due for a in run.load]
        busy = sum(run.cpu.values()) / (run.seconds * cores())
        per_order = [run.cpu_per_order(g) * 1e3 for g in GROUPS] + [run.cpu_per_order() * 1e3]
        lines.append(
            f"| {run.share:.0%} of capacity ({run.rate:.2f}/s) | {run.schedule} | {offered:.2f} | "
            f"{run.in_window / run.seconds:.2f} | "
            f"{run.in_window / len(run.load) if run.load else math.nan:.2f} | "
            f"{len(run.load) - run.in_window} | {len(run.receipts)} of {len(run.load)} | "
            f"{figures(run.to_receipt())} | "
            f"{figures(run.to_completed())} | "
            f"{_seconds(nearest_rank(answered, 0.5))} / {_seconds(nearest_rank(answered, 0.99))} | "
            f"{_seconds(nearest_rank(late, 0.99))} | "
            f"{len(run.followed)} ({run.status_gets / max(len(run.followed), 1):.1f}) | "
            + " / ".join(f"{ms:.0f}" for ms in per_order)
            + f" | {busy:.0%} | {run.load_average[0]:.1f} / {run.load_average[1]:.1f} |"
        )
    return "\n".join(lines)


def summary(runs: list[LoadRun]) -> list[str]:
    lines = []
    for run in runs:
        p99 = nearest_rank(run.to_receipt(), 0.99)
        ratio = run.in_window / len(run.load) if run.load else math.nan
        half = math.isclose(run.share, 0.5)
        lines.append(
            f"- {run.share:.0%} of capacity: p99 POST to receipt {_seconds(p99)} s"
            + (" (goal: at most 1.5 s)" if half else "")
            + f"; sustained / offered {ratio:.2f}"
            + (" (goal: at least 0.98)" if half or math.isclose(run.share, 0.8) else "")
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.latency_bench", description=__doc__)
    parser.add_argument("--loads", default="0.25,0.5,0.8", help="shares of the capacity")
    parser.add_argument("--capacity", type=float, help="orders/s (default: measured first)")
    parser.add_argument("--capacity-orders", type=int, default=100, help="the burst's orders")
    parser.add_argument("--seconds", type=float, default=60.0, help="per load, at most 600")
    parser.add_argument("--schedule", choices=SCHEDULES, default="poisson")
    parser.add_argument("--seed", type=int, default=41, help="of the Poisson arrivals")
    parser.add_argument("--instances", type=int, default=1, help="of the app on the stack")
    parser.add_argument("--warmup", type=int, default=5, help="orders one at a time first")
    parser.add_argument("--drain", type=float, default=60.0, help="seconds after the window")
    parser.add_argument(
        "--status-poll", type=float, default=0.2, help="seconds between GETs (0: no GETs)"
    )
    parser.add_argument(
        "--status-every", type=int, default=1, help="the status of every N-th order mailed"
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="per stack, to be ready")
    parser.add_argument("--logs", default=None, help="where the logs go (default: a temp dir)")
    args = parser.parse_args(argv)
    shares = [float(share) for share in args.loads.split(",")]
    if not 0 < args.seconds <= MAX_SECONDS:
        parser.error(f"--seconds must be over 0 and at most {MAX_SECONDS:.0f}")
    schedule: Schedule = args.schedule

    load_before = os.getloadavg()[0]
    workdir = Path(args.logs or tempfile.mkdtemp(prefix="latency-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"Logs of the stacks and the app: {workdir}", file=sys.stderr)
    if args.capacity:
        capacity, measured = args.capacity, "given (--capacity)"
    else:
        burst = run_orders(
            None, args.instances, "off", args.capacity_orders, 2, 8, args.timeout, workdir
        )
        capacity = burst.rate
        measured = (
            f"measured: a closed-loop burst of {burst.mailed} of {burst.orders} orders by 8 "
            f"clients, {burst.slots} session slots, on a fresh stack"
        )
    runs = [run_load(share, capacity, args, workdir) for share in shares]
    load_after = os.getloadavg()[0]

    print(machine_line(load_before, load_after) + "\n")
    print(
        f"Capacity {capacity:.2f} orders/s ({measured}); {args.instances} instance(s); "
        f"{schedule} arrivals for {args.seconds:.0f} s per load, each on a fresh stack.\n"
    )
    print(table(runs) + "\n")
    print("\n".join(summary(runs)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
