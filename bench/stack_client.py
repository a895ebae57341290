"""The benchmark's side of ``bench.stack_process``: the stack started in a process of its own,
the receipts its mailbox reports, the CPU of its processes, and the orders the benches post.

Shared by the benches that drive orders through the stack of ``make up`` (``bench.pipeline_bench``,
``bench.latency_bench``, ``bench.overview_bench``).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from bench.proc import cpu_by_process
from localdev.api_client import AppClient
from localdev.demo.catalogue import import_through_queue
from spark_jobs.product_import.columns import FIELDS

ROOT = Path(__file__).resolve().parents[1]
IMPORT_QUEUE = "product-import-tasks"
PROCESS_GROUPS = {
    "emulator": lambda command: "servicebus_emulator" in command,
    "Azurite": lambda command: "azurite" in command,
}
HOST = "host + app"
CATALOGUE_SKUS = [f"BENCH-{i:02d}" for i in range(1, 9)]
RECEIPT_ID = "{job_id}.receipt@pipelines.local"  # the receipt e-mail's Message-ID


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

    def messages_left(self, queue: str) -> int:
        """Messages on ``queue`` not yet settled (locked ones included), from the emulator's
        status page: cheap to ask, and asked of the emulator, not of the host."""
        url = f"{self.ready['servicebus_status']}/queues"
        with urllib.request.urlopen(url, timeout=5) as response:
            counts = json.load(response).get(queue, {})
        return sum(int(counts.get(name, 0)) for name in ("active", "scheduled", "deferred"))

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
        wanted = {RECEIPT_ID.format(job_id=job_id): job_id for job_id in job_ids}
        with self.arrived:
            while not wanted.keys() <= self.mails.keys():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.arrived.wait(min(left, 1.0))
            return {job_id: self.mails[m] for m, job_id in wanted.items() if m in self.mails}

    def mails_after(self, seen: int, timeout: float) -> list[tuple[str, float]]:
        """The Message-IDs and arrival times (time.time()) of the mails after the first
        ``seen``, in the order they arrived; waits up to ``timeout`` seconds for one."""
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.mails) > seen, timeout)
            return list(self.mails.items())[seen:]


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
def stack_process(
    max_concurrent_sessions: int | None,
    log: Path,
    environ: dict[str, str] | None = None,
    *,
    instances: int = 1,
) -> Iterator[Stack]:
    """The stack in a process of its own, with ``environ`` (default: this process's)."""
    command = [sys.executable, "-m", "bench.stack_process", "--log", str(log)]
    command += ["--instances", str(instances)]
    if max_concurrent_sessions is not None:
        command += ["--max-concurrent-sessions", str(max_concurrent_sessions)]
    process = subprocess.Popen(
        command, cwd=ROOT, env=environ, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
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


def fresh_path(folder: Path, stem: str, suffix: str) -> Path:
    """``folder/stem+suffix``, numbered when a run before this one took it."""
    path, number = folder / f"{stem}{suffix}", 1
    while path.exists():
        number += 1
        path = folder / f"{stem}-{number}{suffix}"
    return path


def percentile(values: list[float], share: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(share * 100) - 1]


def seconds(value: float) -> str:
    return "n/a" if value != value else f"{value:.2f}"  # NaN: nothing measured
