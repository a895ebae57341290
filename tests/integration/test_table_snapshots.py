"""What the console's overview reads on Azurite: a table whole once, then only the rows written
since; the orders and the failed sessions it counts from that."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from azure.data.tables import TableClient

from shared.adapters.table_failed_sessions import TableFailedSessions
from shared.adapters.table_order_progress import TableOrderProgress
from shared.adapters.table_snapshots import TableSnapshot
from shared.domain.archive import REPLAY, RESOLVE, FailedSession, ReplayClaim
from shared.domain.order_status import StepOutcome

pytestmark = pytest.mark.integration


class CountingTable:
    """The table, counting the rows its queries hand back."""

    def __init__(self, table: TableClient) -> None:
        self._table = table
        self.rows_read = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)

    def query_entities(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        for row in self._table.query_entities(*args, **kwargs):
            self.rows_read += 1
            yield row


def test_a_snapshot_reads_the_table_once_then_only_the_rows_written_since(
    table: TableClient,
) -> None:
    for n in range(20):
        table.upsert_entity({"PartitionKey": f"p{n:02d}", "RowKey": "r", "n": n})
    # Written before the second in which the first read begins (the service's Date header,
    # which the snapshot goes by, counts whole seconds), as rows of a table in use are.
    time.sleep(2.1)
    counting = CountingTable(table)
    snapshot = TableSnapshot(counting, select=("n",), overlap=timedelta(0))  # type: ignore[arg-type]
    with snapshot.refreshed() as (rows, changed):
        assert len(rows) == 20 and len(changed) == 20
    assert counting.rows_read == 20

    counting.rows_read = 0
    table.upsert_entity({"PartitionKey": "p03", "RowKey": "r", "n": 300})
    table.upsert_entity({"PartitionKey": "p99", "RowKey": "r", "n": 99})
    with snapshot.refreshed() as (rows, changed):
        assert rows["p03"]["r"]["n"] == 300 and rows["p99"]["r"]["n"] == 99
        assert len(rows) == 21 and {"p03", "p99"} <= changed

    assert counting.rows_read == 2  # the rows written since, not the 20 of the first read


def test_order_records_follow_the_orders_written_after_the_first_read(table: TableClient) -> None:
    progress = TableOrderProgress(table)
    progress.accept("o/1", "s-1", "t")
    assert [len(r.steps) for r in progress.records(up_to=10)] == [0]

    progress.record("o/1", StepOutcome(1, "GenerateOrderNumber", "completed", None, "s-1", "t"))
    progress.accept("o/2", "s-2", "t")

    records = {r.job_id: r for r in progress.records(up_to=10)}
    assert sorted(records) == ["o/1", "o/2"] and len(records["o/1"].steps) == 1


def summary(session_id: str, reason: str) -> FailedSession:
    return FailedSession(
        session_id=session_id,
        queue="purchase-tasks",
        failed_task="ProcessPayment",
        failed_step=3,
        reason=reason,
        description="declined",
        failed_at="t",
        message_count=5,
        has_last=True,
        context={},
    )


def test_sessions_are_counted_by_status_and_group_as_claims_change_them(
    table: TableClient,
) -> None:
    sessions = TableFailedSessions(table)
    for n in range(3):
        sessions.save_summary(summary(f"a/{n}", "PaymentDeclined"))
    sessions.save_summary(summary("b/0", "PaymentProviderUnavailable"))
    assert sessions.count_sessions() == {
        ("failed", "purchase-tasks", "ProcessPayment", "PaymentDeclined"): 3,
        ("failed", "purchase-tasks", "ProcessPayment", "PaymentProviderUnavailable"): 1,
    }

    sessions.claim_replay("a/0", ReplayClaim("k-0", "a/0-new", "t", REPLAY))
    sessions.claim_replay("a/1", ReplayClaim("k-1", "", "t", RESOLVE))

    assert sessions.count_sessions() == {
        ("failed", "purchase-tasks", "ProcessPayment", "PaymentDeclined"): 2,
        ("resolved", "purchase-tasks", "ProcessPayment", "PaymentDeclined"): 1,
        ("failed", "purchase-tasks", "ProcessPayment", "PaymentProviderUnavailable"): 1,
    }


def test_a_bounded_snapshot_keeps_the_smallest_partitions_as_rows_arrive(
    table: TableClient,
) -> None:
    for n in (10, 20, 30, 40):
        table.upsert_entity({"PartitionKey": f"p{n}", "RowKey": "r"})
    snapshot = TableSnapshot(table, partitions=2)
    with snapshot.refreshed() as (rows, _):
        assert sorted(rows) == ["p10", "p20"]

    table.upsert_entity({"PartitionKey": "p15", "RowKey": "r"})  # among the smallest
    table.upsert_entity({"PartitionKey": "p50", "RowKey": "r"})  # past them
    with snapshot.refreshed() as (rows, _):
        assert sorted(rows) == ["p10", "p15"]


def test_orders_past_the_counted_bound_are_not_kept(table: TableClient) -> None:
    progress = TableOrderProgress(table)
    for job in ("o/1", "o/2", "o/3"):
        progress.accept(job, f"s-{job}", "t")

    assert [r.job_id for r in progress.records(up_to=2)] == ["o/1", "o/2"]
    progress.accept("o/0", "s-0", "t")
    assert [r.job_id for r in progress.records(up_to=2)] == ["o/0", "o/1"]
    assert [r.job_id for r in progress.records(up_to=10)] == ["o/0", "o/1", "o/2", "o/3"]


def test_rows_the_purge_deleted_leave_a_snapshot_at_its_next_whole_read(
    table: TableClient,
) -> None:
    for n in range(3):
        table.upsert_entity({"PartitionKey": f"p{n}", "RowKey": "r", "n": n})
    every_read_whole = TableSnapshot(table, select=("n",), full_read_every=timedelta(0))
    now_and_then = TableSnapshot(table, select=("n",), full_read_every=timedelta(hours=1))
    for snapshot in (every_read_whole, now_and_then):
        with snapshot.refreshed() as (rows, _):
            assert set(rows) == {"p0", "p1", "p2"}

    table.delete_entity("p1", "r")  # as the purge deletes

    with every_read_whole.refreshed() as (rows, _):
        assert set(rows) == {"p0", "p2"}
    with now_and_then.refreshed() as (rows, _):
        assert set(rows) == {"p0", "p1", "p2"}  # until its next whole read, within the hour
