"""Fanning 100,000 catalogue rows into the import queue: the Spark job on local[2] vs a naive
single-threaded loop that sends one message at a time with one sender.

Same emulator, same run, same rows (separate job ids, so duplicate detection keeps them apart).
The Spark job runs twice: first in a fresh Spark session (cold), then again (warm, as on a
running cluster). Run: ``.venv/bin/python -m bench.spark_import_bench`` (``--rows N
--sessions S``). Prints rows/s of each, the ratios and the emulator's CPU per row; the goal is
at least 20x.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from azure.servicebus import ServiceBusClient

QUEUE = "product-import-tasks"


# The app's own local config: the import queue as the app gets it (sessions, duplicate
# detection), so the benchmark measures what the job meets.
APP_CONFIG = Path(__file__).resolve().parents[1] / "infra" / "local" / "config.json"


def write_catalogue(path: Path, rows: int) -> None:
    with path.open("w", encoding="utf-8") as out:
        out.write("sku,name,price,currency,description\n")
        for i in range(1, rows + 1):
            out.write(f"SKU-{i:07d},Product {i},{1 + i % 500}.{i % 100:02d},EUR,row {i}\n")


def naive_loop(connection_string: str, path: Path, job_id: str, sessions: int) -> int:
    """One message per send call, one sender, rows in file order: the baseline."""
    from shared.adapters.servicebus_sender import to_service_bus_message
    from shared.domain.pipelines import import_message
    from spark_jobs.product_import.sending import message_id

    lines = path.read_text(encoding="utf-8").splitlines()[1:]
    total = len(lines)
    with (
        ServiceBusClient.from_connection_string(connection_string) as client,
        client.get_queue_sender(QUEUE) as sender,
    ):
        for index, line in enumerate(lines):
            sku, name, price, currency, description = line.split(",")
            k = index * sessions // total
            start = -(-k * total // sessions)
            end = -(-(k + 1) * total // sessions)
            row = {"sku": sku, "name": name, "price": price, "currency": currency,
                   "description": description}  # fmt: skip
            task = import_message(job_id, index - start + 1, is_last=index == end - 1, row=row)
            message = to_service_bus_message(
                f"{job_id}-{k:04d}", task, message_id=message_id(job_id, index + 1)
            )
            sender.send_messages(message)
    return total


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--sessions", type=int, default=100)
    args = parser.parse_args()

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from localdev.servicebus_emulator.testing import run_emulator
    from shared.config import ServiceBusConnectionSettings
    from spark_jobs.product_import.job import run_import

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    with tempfile.TemporaryDirectory() as tmp, run_emulator(APP_CONFIG) as emulator:
        path = Path(tmp) / "catalogue.csv"
        write_catalogue(path, args.rows)

        def spark_run(job_id: str) -> dict[str, float]:
            cpu, started = emulator_cpu_seconds(emulator.pid), time.perf_counter()
            result = run_import(
                spark,
                input_path=str(path),
                fmt="csv",
                job_id=job_id,
                queue_name=QUEUE,
                service_bus=ServiceBusConnectionSettings(
                    connection_string=emulator.connection_string
                ),
                sessions=args.sessions,
            )
            seconds = time.perf_counter() - started
            return {
                "rows": result.manifest.rows_sent,
                "seconds": seconds,
                "emulator_cpu_us_per_row": emulator_cpu_seconds(emulator.pid) - cpu,
            }

        # The first job of a Spark session pays for the JVM's warm-up (class loading, code
        # generation, Python workers); a job on a running cluster does not. Both are reported.
        cold = spark_run("bench-spark-cold")
        warm = spark_run("bench-spark-warm")

        cpu, started = emulator_cpu_seconds(emulator.pid), time.perf_counter()
        naive = {
            "rows": naive_loop(emulator.connection_string, path, "bench-naive", args.sessions),
            "seconds": time.perf_counter() - started,
            "emulator_cpu_us_per_row": emulator_cpu_seconds(emulator.pid) - cpu,
        }
        on_queue = emulator.counts()[QUEUE]["active"]

    spark.stop()
    # Every run's messages must be on the queue, or the rates mean nothing.
    assert on_queue == 3 * args.rows, f"{on_queue} messages on the queue, expected {3 * args.rows}"
    runs = {"spark_cold": cold, "spark_warm": warm, "naive": naive}
    report: dict[str, object] = {"rows": args.rows, "sessions": args.sessions}
    for name, run in runs.items():
        report[f"{name}_rows_per_s"] = round(run["rows"] / run["seconds"])
        report[f"{name}_seconds"] = round(run["seconds"], 1)
        report[f"{name}_emulator_cpu_us_per_row"] = round(
            run["emulator_cpu_us_per_row"] / run["rows"] * 1e6
        )
    naive_rate = naive["rows"] / naive["seconds"]
    report["ratio_cold"] = round(cold["rows"] / cold["seconds"] / naive_rate, 1)
    report["ratio_warm"] = round(warm["rows"] / warm["seconds"] / naive_rate, 1)
    report["goal"] = 20
    print(json.dumps(report))
    return 0


def emulator_cpu_seconds(pid: int) -> float:
    """User + system CPU time of the emulator process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    sys.exit(main())
