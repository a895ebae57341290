"""The whole job against the project's Service Bus emulator: what arrives on the queue."""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.servicebus.exceptions import ServiceBusConnectionError

from shared.config import ServiceBusConnectionSettings
from spark_jobs.product_import import sending
from spark_jobs.product_import.job import assign_sessions, number_rows, read_catalogue, run_import
from spark_jobs.product_import.job import validate as split_rejects
from spark_jobs.product_import.sending import WORKER_SENDER, SendOptions, send_partition

from .catalogues import product, write_csv, write_jsonl, write_parquet, write_xlsx
from .queues import QUEUE, assert_arrived_once_in_order, drain, peek_session


class Accumulator:
    """What a Spark accumulator offers the send function, for calling it without Spark."""

    value = 0

    def add(self, n: int) -> None:
        self.value += n


@pytest.mark.integration
@pytest.mark.parametrize("fmt", ["csv", "json", "parquet", "xlsx"])
def test_every_valid_row_arrives_once_in_order_with_last_markers(
    spark, connection_string, tmp_path: Path, fmt: str, caplog
) -> None:
    rows = 120
    path = {
        "csv": lambda: write_csv(tmp_path / "c.csv", rows, broken_lines={7: "bad,line"}),
        "json": lambda: write_jsonl(tmp_path / "c.jsonl", rows, broken_lines={7: "{oops"}),
        "parquet": lambda: write_parquet(spark, tmp_path / "c.parquet", rows),
        "xlsx": lambda: write_xlsx(tmp_path / "c.xlsx", rows, empty_rows={7}),
    }[fmt]()
    job_id = f"import-{fmt}"
    caplog.set_level(logging.INFO, logger="spark_jobs.product_import")

    manifest = run_import(
        spark,
        input_path=str(path),
        fmt=fmt,
        job_id=job_id,
        queue_name=QUEUE,
        service_bus=ServiceBusConnectionSettings(connection_string=connection_string),
        sessions=3,
        rejects_path=str(tmp_path / "rejects"),
    )

    rejected = [] if fmt == "parquet" else [7]
    expected = [product(i)["sku"] for i in range(1, rows + 1) if i not in rejected]
    received = drain(connection_string)
    assert_arrived_once_in_order(received, job_id, expected)
    assert (manifest.rows_read, manifest.rows_rejected, manifest.rows_sent) == (
        rows,
        len(rejected),
        len(expected),
    )
    assert manifest.sessions == {k: len(v) for k, v in received.items()}
    # Nothing exported: the job starts no trace and its messages carry none.
    assert manifest.trace_id is None
    assert not [m for s in received.values() for m in s if "traceparent" in m["properties"]]
    written = [json.loads(line) for f in (tmp_path / "rejects").glob("*.json") for line in f.open()]
    assert [r["row_number"] for r in written] == rejected
    assert all(r["reason"] for r in written)
    n = len(expected)
    assert any(f"job {job_id}: {n} of {n} rows sent (100%)" in m for m in caplog.messages)


@pytest.mark.integration
def test_a_rerun_of_the_same_job_sends_nothing_twice(spark, connection_string, tmp_path) -> None:
    path = write_csv(tmp_path / "c.csv", 60)
    for _ in range(2):
        run_import(
            spark,
            input_path=str(path),
            fmt="csv",
            job_id="rerun",
            queue_name=QUEUE,
            service_bus=ServiceBusConnectionSettings(connection_string=connection_string),
            sessions=2,
        )

    expected = [product(i)["sku"] for i in range(1, 61)]
    assert_arrived_once_in_order(drain(connection_string), "rerun", expected)


def planned_rows(spark, path: Path, job_id: str, sessions: int, total: int) -> list:
    valid, _ = split_rejects(number_rows(read_catalogue(spark, str(path), "csv")))
    planned = assign_sessions(valid, job_id, sessions, total=total)
    return planned.orderBy("session_id", "step").collect()


@pytest.mark.integration
def test_a_retried_task_sends_nothing_twice(spark, connection_string, tmp_path) -> None:
    """A partition whose first attempt dies after sending its first session, in the middle of
    its second, then runs again from the start: as Spark retries a failed task."""
    rows = planned_rows(spark, write_csv(tmp_path / "c.csv", 40), "retry", 2, 40)
    sent = Accumulator()
    send = send_partition(
        job_id="retry",
        queue_name=QUEUE,
        connection=ServiceBusConnectionSettings(connection_string=connection_string),
        options=SendOptions(),
        sent=sent,
    )

    def dies_in_second_session():
        for row in rows:
            if row["session_id"].endswith("0001") and row["step"] == 5:
                raise RuntimeError("executor lost")
            yield row

    with pytest.raises(RuntimeError):
        send(dies_in_second_session())
    assert peek_session(connection_string, "retry-0000") == 20  # sent before the crash
    assert peek_session(connection_string, "retry-0001") == 0
    send(iter(rows))

    expected = [product(i)["sku"] for i in range(1, 41)]
    assert_arrived_once_in_order(drain(connection_string), "retry", expected)
    assert sent.value == 40  # the retry sent all 40; the queue dropped the first 20 again


@pytest.mark.integration
def test_a_worker_keeps_one_sender_for_its_partitions_and_replaces_one_that_failed(
    spark, connection_string, tmp_path, monkeypatch
) -> None:
    rows = planned_rows(spark, write_csv(tmp_path / "c.csv", 30), "reuse", 3, 30)
    built: list[object] = []
    real_client = sending.service_bus_client

    def counting_client(settings, **options):
        built.append(settings)
        return real_client(settings, **options)

    monkeypatch.setattr(sending, "service_bus_client", counting_client)
    WORKER_SENDER.close()
    send = send_partition(
        job_id="reuse",
        queue_name=QUEUE,
        connection=ServiceBusConnectionSettings(connection_string=connection_string),
        options=SendOptions(),
        sent=Accumulator(),
    )

    def session(k: int) -> Iterator:
        return (row for row in rows if row["session_id"] == f"reuse-{k:04d}")

    def fails() -> Iterator:
        yield from session(1)
        raise RuntimeError("executor lost")

    send(session(0))
    with pytest.raises(RuntimeError):
        send(fails())
    send(session(1))
    send(session(2))
    WORKER_SENDER.close()

    assert len(built) == 2  # one for the first two partitions, one after the failure
    expected = [product(i)["sku"] for i in range(1, 31)]
    assert_arrived_once_in_order(drain(connection_string), "reuse", expected)


@pytest.fixture
def refusing_broker() -> Iterator[tuple[int, list[int]]]:
    """A TCP server on 127.0.0.1 that accepts each connection and closes it at once, as a
    namespace that drops connections does: its port and the connections it has seen."""
    server = socket.create_server(("127.0.0.1", 0))
    seen: list[int] = []

    def serve() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            seen.append(1)
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], seen
    server.close()
    thread.join(timeout=5)


def test_a_failing_send_is_attempted_as_often_as_the_policy_says_and_no_more(
    refusing_broker,
) -> None:
    port, connections = refusing_broker
    settings = ServiceBusConnectionSettings(
        connection_string=f"Endpoint=sb://127.0.0.1:{port}/;SharedAccessKeyName=k;"
        "SharedAccessKey=v;UseDevelopmentEmulator=true"
    )
    send = send_partition(
        job_id="j",
        queue_name=QUEUE,
        connection=settings,
        options=SendOptions(max_attempts=3, backoff_seconds=0.01),
        sent=Accumulator(),
    )
    row = {**product(1), "session_id": "j-0000", "step": 1, "is_last": True, "row_number": 1}

    with pytest.raises(ServiceBusConnectionError):
        send(iter([row]))

    # One connection per attempt: the SDK's policy is the only layer that retries.
    assert len(connections) == 3
