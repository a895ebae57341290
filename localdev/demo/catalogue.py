"""Importing the demo catalogue: through the Spark job on local Spark (as in production, where
it runs on Databricks), or, on a machine without Java, straight onto the import queue."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from azure.servicebus import ServiceBusClient

from shared.adapters.servicebus_sender import to_service_bus_message
from shared.domain.pipelines import import_message

REPO_ROOT = Path(__file__).resolve().parents[2]
FIELDS = ("sku", "name", "price", "currency", "description")
# The job's own log lines carry its loggers' names (Spark's own lines come from log4j).
_JOB_LOG_LINE = re.compile(r"\bINFO spark_jobs\.[\w.]+ (.+)$")


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


class SparkImport:
    """``python -m spark_jobs.product_import`` on local[2], started at once and running in the
    background: ``finished()`` says whether it is done, ``news()`` hands over the job's own
    log lines (its ``spark_jobs`` logger) printed since the last call, ``result()`` waits for
    the manifest. Everything it prints also goes to ``log_file``."""

    def __init__(
        self,
        path: Path,
        *,
        job_id: str,
        queue: str,
        sessions: int,
        servicebus_connection_string: str,
        storage_connection_string: str,
        log_file: Path,
    ) -> None:
        self.job_id = job_id
        self._log_file = log_file
        env = {
            **os.environ,
            "ServiceBusConnection": servicebus_connection_string,
            "AzureWebJobsStorage": storage_connection_string,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
        }
        command = [
            sys.executable, "-m", "spark_jobs.product_import",
            "--input", str(path), "--format", "csv",
            "--job-id", job_id, "--sessions", str(sessions), "--queue", queue,
            "--connection-setting", "ServiceBusConnection",
            "--storage-setting", "AzureWebJobsStorage",
            "--master", "local[2]",
        ]  # fmt: skip
        self._lock = threading.Lock()
        self._stdout: list[str] = []
        self._news: list[str] = []
        self._log = log_file.open("a", encoding="utf-8", errors="replace")
        self._log.write(f"\n==== {' '.join(command)}\n")
        self._log.flush()
        self._process = subprocess.Popen(
            command,
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
        )
        assert self._process.stdout is not None and self._process.stderr is not None
        self._readers = [
            threading.Thread(target=self._read, args=(stream, keep), daemon=True)
            for stream, keep in ((self._process.stdout, True), (self._process.stderr, False))
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, stream: IO[str], keep: bool) -> None:
        for line in stream:
            with self._lock:
                self._log.write(line)
                self._log.flush()
                if keep:
                    self._stdout.append(line)
                if said := _JOB_LOG_LINE.search(line.rstrip()):
                    self._news.append(said.group(1))

    def finished(self) -> bool:
        return self._process.poll() is not None

    def news(self) -> list[str]:
        with self._lock:
            news, self._news = self._news, []
        return news

    def result(self, timeout: float) -> ImportRun:
        """The job's manifest once it exits; ``RuntimeError`` with the log's tail when it fails
        or outlives ``timeout``."""
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        for reader in self._readers:
            reader.join(10)
        with self._lock:
            self._log.close()
            manifest = _last_json_line("".join(self._stdout))
        if self._process.returncode != 0 or manifest is None:
            tail = "\n".join(self._log_file.read_text(errors="replace").splitlines()[-15:])
            raise RuntimeError(
                f"The Spark job failed (exit code {self._process.returncode}):\n{tail}"
            )
        return ImportRun(
            job_id=self.job_id,
            rows_read=int(manifest["rows_read"]),
            rows_rejected=int(manifest["rows_rejected"]),
            rows_sent=int(manifest["rows_sent"]),
            sessions=int(manifest["session_count"]),
            engine="spark",
        )

    def stop(self) -> None:
        """Kill the job if it still runs (the demo gave up)."""
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()


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
