"""Fanning catalogue rows into the import queue: the Spark job against the SDK's own batched
send of the same rows, and the job on ``local[2]`` against ``local[1]``, in one run.

``.venv/bin/python -m bench.spark_import_bench`` (``--rows N --sessions S --repeat K``).

- SDK batched send: this process, one sender (opened before the clock starts), the rows
  already in memory with their sessions, steps and ids; for each session, the app's messages
  (``to_service_bus_message``, the same the job sends) are added to
  ``ServiceBusMessageBatch``-es filled to the size limit and sent, with the unmodified
  azure-servicebus SDK. This is the rate one Python process gets out of the SDK here: its
  per-message encoding, not the broker, bounds it.
- The Spark job: ``run_import`` on a CSV of the same rows in the same number of sessions,
  timed whole (reading, numbering, planning and sending), on ``local[2]`` and then on
  ``local[1]``, each after a warm-up run of a tenth of the rows in the same Spark session (as
  on a running cluster: the JVM and the Python workers are up).

Each configuration gets a fresh emulator (in memory, the app's queue definitions), and the
benchmark checks that every message it timed is on the queue. With ``--repeat K`` each timed
run is done K times and the fastest counts. CPU per row: this process and its children
(Spark's JVM and Python workers) and the emulator, from ``/proc``. Prints a Markdown table.
Goals: the job on local[2] at least 0.8 of the SDK's batched send, and local[2] at least 1.6x
local[1].
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from azure.servicebus import ServiceBusClient, ServiceBusSender
from azure.servicebus.exceptions import MessageSizeExceededError

from bench.proc import cpu_by_group
from servicebus_emulator.testing import EmulatorProcess, run_emulator
from shared.adapters.servicebus_sender import to_service_bus_message
from shared.config import ServiceBusConnectionSettings
from shared.domain.pipelines import import_message
from spark_jobs.product_import.columns import FIELDS

QUEUE = "product-import-tasks"
# The app's own local config: the import queue as the app gets it (sessions, duplicate
# detection), so the benchmark measures what the job meets.
APP_CONFIG = Path(__file__).resolve().parents[1] / "infra" / "local" / "config.json"
EMULATOR = {"emulator": lambda command: "servicebus_emulator" in command}
CLIENT = "client"


def write_catalogue(path: Path, rows: int) -> None:
    with path.open("w", encoding="utf-8") as out:
        out.write(",".join(FIELDS) + "\n")
        for i in range(1, rows + 1):
            out.write(f"SKU-{i:07d},Product {i},{1 + i % 500}.{i % 100:02d},EUR,row {i}\n")


def planned_sessions(path: Path, sessions: int) -> list[list[tuple[int, dict[str, str]]]]:
    """The rows of the catalogue cut as the job cuts them: ``sessions`` contiguous runs
    (sizes differ by at most one) of (row_number, row)."""
    lines = path.read_text(encoding="utf-8").splitlines()[1:]
    rows = [(number, dict(zip(FIELDS, line.split(","), strict=True))) for number, line in
            enumerate(lines, start=1)]  # fmt: skip
    n = max(1, min(sessions, len(rows)))
    bounds = [-(-k * len(rows) // n) for k in range(n + 1)]
    return [rows[bounds[k] : bounds[k + 1]] for k in range(n)]


def sdk_batched_send(
    sender: ServiceBusSender, job_id: str, sessions: list[list[tuple[int, dict[str, str]]]]
) -> int:
    """The SDK's own batched send of the planned rows, session after session."""
    sent = 0
    for k, rows in enumerate(sessions):
        session_id = f"{job_id}-{k:04d}"
        batch = sender.create_message_batch()
        for step, (number, row) in enumerate(rows, start=1):
            task = import_message(job_id, step, is_last=step == len(rows), row=row)
            message = to_service_bus_message(session_id, task, message_id=f"{job_id}:{number}")
            try:
                batch.add_message(message)
            except MessageSizeExceededError:
                sender.send_messages(batch)
                sent += len(batch)
                batch = sender.create_message_batch()
                batch.add_message(message)
        sender.send_messages(batch)
        sent += len(batch)
    return sent


@dataclass(frozen=True)
class Run:
    name: str
    rows: int
    seconds: float
    cpu: dict[str, float]

    @property
    def rate(self) -> float:
        return self.rows / self.seconds

    def cpu_per_row(self, group: str) -> float:
        return self.cpu[group] / self.rows * 1e6


def timed(name: str, emulator: EmulatorProcess, work: Callable[[], int]) -> Run:
    before = cpu_by_group(os.getpid(), EMULATOR, CLIENT)
    started = time.perf_counter()
    rows = work()
    seconds = time.perf_counter() - started
    after = cpu_by_group(os.getpid(), EMULATOR, CLIENT)
    return Run(name, rows, seconds, {group: after[group] - before[group] for group in before})


def fastest(runs: list[Run]) -> Run:
    return min(runs, key=lambda run: run.seconds)


@contextmanager
def emulator_expecting(messages: Callable[[], int]) -> Iterator[EmulatorProcess]:
    """A fresh emulator; on the way out, checks that ``messages()`` are on the queue (or the
    rates would mean nothing)."""
    with run_emulator(APP_CONFIG) as emulator:
        yield emulator
        on_queue = emulator.counts()[QUEUE]["active"]
        expected = messages()
        assert on_queue == expected, f"{on_queue} messages on the queue, expected {expected}"


def sdk_runs(path: Path, warm_path: Path, sessions: int, repeat: int) -> Run:
    planned = planned_sessions(path, sessions)
    warm = planned_sessions(warm_path, sessions)
    sent: list[int] = []
    with (
        emulator_expecting(lambda: sum(sent)) as emulator,
        ServiceBusClient.from_connection_string(emulator.connection_string) as client,
        client.get_queue_sender(QUEUE) as sender,
    ):
        sent.append(sdk_batched_send(sender, f"sdk-warm-{uuid.uuid4().hex[:6]}", warm))

        def send() -> int:
            sent.append(sdk_batched_send(sender, f"sdk-{uuid.uuid4().hex[:6]}", planned))
            return sent[-1]

        runs = [timed("SDK batched send, one process", emulator, send) for _ in range(repeat)]
    return fastest(runs)


def spark_runs(master: str, path: Path, warm_path: Path, sessions: int, repeat: int) -> Run:
    from pyspark.sql import SparkSession

    from spark_jobs.product_import.job import run_import

    spark = SparkSession.builder.master(master).config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    sent: list[int] = []
    try:
        with emulator_expecting(lambda: sum(sent)) as emulator:
            settings = ServiceBusConnectionSettings(connection_string=emulator.connection_string)

            def job(source: Path) -> int:
                manifest = run_import(
                    spark,
                    input_path=str(source),
                    fmt="csv",
                    job_id=f"spark-{uuid.uuid4().hex[:6]}",
                    queue_name=QUEUE,
                    service_bus=settings,
                    sessions=sessions,
                )
                sent.append(manifest.rows_sent)
                return manifest.rows_sent

            job(warm_path)
            runs = [
                timed(f"Spark job, {master}", emulator, lambda: job(path)) for _ in range(repeat)
            ]
    finally:
        spark.stop()
    return fastest(runs)


def table(runs: list[Run]) -> str:
    lines = [
        "| run | rows | seconds | rows/s | CPU µs/row, this process and Spark | "
        "CPU µs/row, emulator |",
        "|---|---|---|---|---|---|",
    ]
    for run in runs:
        lines.append(
            f"| {run.name} | {run.rows:,} | {run.seconds:.1f} | {run.rate:,.0f} | "
            f"{run.cpu_per_row(CLIENT):.0f} | {run.cpu_per_row('emulator'):.0f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.spark_import_bench")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=1, help="timed runs of each; fastest counts")
    args = parser.parse_args(argv)

    from spark_jobs.product_import.__main__ import executors_run_this_python

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    executors_run_this_python(os.environ)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="spark-bench-") as tmp:
        path, warm_path = Path(tmp) / "catalogue.csv", Path(tmp) / "warm.csv"
        write_catalogue(path, args.rows)
        write_catalogue(warm_path, max(args.rows // 10, args.sessions))
        sdk = sdk_runs(path, warm_path, args.sessions, args.repeat)
        # local[2] first: the JVM outlives a Spark session, so the second master finds it the
        # warmer; local[1] second makes the scaling ratio the conservative one.
        local2 = spark_runs("local[2]", path, warm_path, args.sessions, args.repeat)
        local1 = spark_runs("local[1]", path, warm_path, args.sessions, args.repeat)
    load_after = os.getloadavg()

    print(
        f"{len(os.sched_getaffinity(0))} cores; load average {load_before[0]:.1f} before, "
        f"{load_after[0]:.1f} after (1 min); {args.rows:,} rows in {args.sessions} sessions\n"
    )
    print(table([sdk, local2, local1]) + "\n")
    print("| ratio | this run | goal |\n|---|---|---|")
    print(f"| Spark job on local[2] / SDK batched send | {local2.rate / sdk.rate:.2f} | ≥ 0.8 |")
    print(f"| Spark job: local[2] / local[1] | {local2.rate / local1.rate:.2f} | ≥ 1.6 |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
