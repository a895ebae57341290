"""The whole job against the project's Service Bus emulator: what arrives on the queue."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusClient
from azure.servicebus.exceptions import OperationTimeoutError, ServiceBusConnectionError

from shared.config import ServiceBusConnectionSettings
from spark_jobs.product_import.job import assign_sessions, number_rows, read_catalogue, run_import
from spark_jobs.product_import.job import validate as split_rejects
from spark_jobs.product_import.sending import SendOptions, send_partition, send_with_retry

from .catalogues import product, write_csv, write_jsonl, write_parquet, write_xlsx

QUEUE = "product-import-tasks"


# The app's own local config (infra/local/config.json): the import queue exactly as the app
# and make up get it, duplicate detection included.
APP_CONFIG = Path(__file__).resolve().parents[2] / "infra" / "local" / "config.json"


@pytest.fixture(scope="module")
def connection_string() -> Iterator[str]:
    testing = pytest.importorskip("localdev.servicebus_emulator.testing")
    with testing.run_emulator(APP_CONFIG) as emulator:
        yield emulator.connection_string


def drain(connection_string: str) -> dict[str, list[dict]]:
    """Every message on the queue, session by session, in delivery order (completed)."""
    sessions: dict[str, list[dict]] = {}
    # No retries: the SDK retries "no session available" as a timeout, 4 x max_wait_time.
    with ServiceBusClient.from_connection_string(connection_string, retry_total=0) as client:
        while True:
            try:
                receiver = client.get_queue_receiver(
                    QUEUE, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=1
                )
                with receiver:
                    for message in receiver:
                        body = json.loads(b"".join(message.body))
                        sessions.setdefault(message.session_id, []).append(
                            {"message_id": message.message_id, **body}
                        )
                        receiver.complete_message(message)
            except OperationTimeoutError:
                return sessions


def peek_session(connection_string: str, session_id: str) -> int:
    """How many messages the session holds, without settling any."""
    with (
        ServiceBusClient.from_connection_string(connection_string) as client,
        client.get_queue_receiver(QUEUE, session_id=session_id, max_wait_time=2) as receiver,
    ):
        return len(receiver.peek_messages(max_message_count=1000))


def assert_arrived_once_in_order(sessions: dict[str, list[dict]], job_id: str, skus: list[str]):
    received = [m for session_id in sorted(sessions) for m in sessions[session_id]]
    assert [m["payload"]["sku"] for m in received] == skus  # each once, sessions contiguous
    assert len({m["message_id"] for m in received}) == len(received)
    for messages in sessions.values():
        assert [m["step"] for m in messages] == list(range(1, len(messages) + 1))
        assert [m["is_last"] for m in messages] == [False] * (len(messages) - 1) + [True]
        assert all(m["job_id"] == job_id and m["task"] == "ImportProduct" for m in messages)


@pytest.mark.integration
@pytest.mark.parametrize("fmt", ["csv", "json", "parquet", "xlsx"])
def test_every_valid_row_arrives_once_in_order_with_last_markers(
    spark, connection_string, tmp_path: Path, fmt: str
) -> None:
    rows = 120
    path = {
        "csv": lambda: write_csv(tmp_path / "c.csv", rows, broken_lines={7: "bad,line"}),
        "json": lambda: write_jsonl(tmp_path / "c.jsonl", rows, broken_lines={7: "{oops"}),
        "parquet": lambda: write_parquet(spark, tmp_path / "c.parquet", rows),
        "xlsx": lambda: write_xlsx(tmp_path / "c.xlsx", rows, empty_rows={7}),
    }[fmt]()
    job_id = f"import-{fmt}"

    result = run_import(
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
    assert_arrived_once_in_order(drain(connection_string), job_id, expected)
    manifest = result.manifest
    assert (manifest.rows_read, manifest.rows_rejected, manifest.rows_sent) == (
        rows,
        len(rejected),
        len(expected),
    )
    assert sum(manifest.sessions.values()) == len(expected) and len(manifest.sessions) == 3
    written = [json.loads(line) for f in (tmp_path / "rejects").glob("*.json") for line in f.open()]
    assert [r["row_number"] for r in written] == rejected
    assert all(r["reason"] for r in written)


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


@pytest.mark.integration
def test_a_retried_task_sends_nothing_twice(spark, connection_string, tmp_path) -> None:
    """A partition whose first attempt dies after sending its first session, in the middle of
    its second, then runs again from the start: as Spark retries a failed task."""
    path = write_csv(tmp_path / "c.csv", 40)
    valid, _ = split_rejects(number_rows(read_catalogue(spark, str(path), "csv")))
    rows = assign_sessions(valid, "retry", 2, total=40).orderBy("session_id", "step").collect()

    class Accumulator:
        value = 0

        def add(self, n: int) -> None:
            self.value += n

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


def test_transient_errors_are_retried_with_growing_backoff_and_permanent_ones_are_not() -> None:
    calls: list[int] = []
    sleeps: list[float] = []

    def flaky() -> None:
        calls.append(1)
        if len(calls) < 3:
            raise ServiceBusConnectionError(message="connection reset")

    send_with_retry(flaky, SendOptions(min_backoff_seconds=1.0), sleep=sleeps.append)

    assert len(calls) == 3
    assert 0.5 <= sleeps[0] <= 1.0 and 1.0 <= sleeps[1] <= 2.0

    def broken() -> None:
        raise ValueError("not a Service Bus error")

    with pytest.raises(ValueError):
        send_with_retry(broken, SendOptions(), sleep=sleeps.append)
