"""Importing the demo catalogue: through the Spark job on local Spark (as in production, where
it runs on Databricks), or, on a machine without Java, straight onto the import queue."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from azure.servicebus import ServiceBusClient

from shared.adapters.servicebus_sender import to_service_bus_message
from shared.domain.pipelines import import_message

REPO_ROOT = Path(__file__).resolve().parents[2]
FIELDS = ("sku", "name", "price", "currency", "description")


@dataclass(frozen=True)
class ImportRun:
    job_id: str
    rows_read: int
    rows_rejected: int
    rows_sent: int
    sessions: int
    engine: str  # "spark" or "queue"


def spark_unavailable() -> str | None:
    """Why local Spark cannot run here, or None when it can."""
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed"
    java_home = os.environ.get("JAVA_HOME")
    if not shutil.which("java") and not (java_home and (Path(java_home) / "bin" / "java").exists()):
        return "Java is not installed (Spark runs on the JVM)"
    return None


def import_with_spark(
    path: Path,
    *,
    job_id: str,
    queue: str,
    sessions: int,
    servicebus_connection_string: str,
    storage_connection_string: str,
    log_file: Path,
    timeout: float = 180.0,
) -> ImportRun:
    """Run ``python -m spark_jobs.product_import`` on local[2]; its log goes to ``log_file``.
    Raises ``RuntimeError`` with the log's tail when the job fails."""
    env = {
        **os.environ,
        "ServiceBusConnection": servicebus_connection_string,
        "AzureWebJobsStorage": storage_connection_string,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    command = [
        sys.executable,
        "-m",
        "spark_jobs.product_import",
        "--input",
        str(path),
        "--format",
        "csv",
        "--job-id",
        job_id,
        "--sessions",
        str(sessions),
        "--queue",
        queue,
        "--connection-setting",
        "ServiceBusConnection",
        "--storage-setting",
        "AzureWebJobsStorage",
        "--master",
        "local[2]",
    ]
    with log_file.open("ab") as log:
        log.write(f"\n==== {' '.join(command)}\n".encode())
        log.flush()
        done = subprocess.run(
            command,
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=log,
            timeout=timeout,
            check=False,
        )
        log.write(done.stdout)
    manifest = _last_json_line(done.stdout.decode(errors="replace"))
    if done.returncode != 0 or manifest is None:
        tail = "\n".join(log_file.read_text(errors="replace").splitlines()[-15:])
        raise RuntimeError(f"The Spark job failed (exit code {done.returncode}):\n{tail}")
    return ImportRun(
        job_id=job_id,
        rows_read=int(manifest["rows_read"]),
        rows_rejected=int(manifest["rows_rejected"]),
        rows_sent=int(manifest["rows_sent"]),
        sessions=int(manifest["session_count"]),
        engine="spark",
    )


def import_through_queue(
    path: Path, *, job_id: str, queue: str, sessions: int, servicebus_connection_string: str
) -> ImportRun:
    """What the Spark job does, on one core: rows with the wrong number of fields are rejected,
    the others go to the queue as ``sessions`` contiguous, ordered sessions with the same
    message ids (job:row) the job uses."""
    with path.open(newline="", encoding="utf-8") as file:
        records = list(csv.reader(file))[1:]
    valid = [
        (number, dict(zip(FIELDS, record, strict=True)))
        for number, record in enumerate(records, start=1)
        if len(record) == len(FIELDS)
    ]
    n = max(1, min(sessions, len(valid)))
    with (
        ServiceBusClient.from_connection_string(servicebus_connection_string) as client,
        client.get_queue_sender(queue) as sender,
    ):
        for k in range(n):
            chunk = valid[k * len(valid) // n : (k + 1) * len(valid) // n]
            session_id = f"{job_id}-{k:04d}"
            sender.send_messages(
                [
                    to_service_bus_message(
                        session_id,
                        import_message(
                            job_id,
                            step,
                            is_last=step == len(chunk),
                            row={name: value or None for name, value in row.items()},
                        ),
                        message_id=f"{job_id}:{number}",
                    )
                    for step, (number, row) in enumerate(chunk, start=1)
                ]
            )
    return ImportRun(
        job_id=job_id,
        rows_read=len(records),
        rows_rejected=len(records) - len(valid),
        rows_sent=len(valid),
        sessions=n,
        engine="queue",
    )


def _last_json_line(output: str) -> dict[str, Any] | None:
    for line in reversed(output.strip().splitlines()):
        if line.startswith("{"):
            try:
                return dict(json.loads(line))
            except ValueError:
                return None
    return None
