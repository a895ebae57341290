"""Idempotency-Key records and order progress on a real Azurite: the insert is the lock, a
take-over and a release are conditional on the ETag they read."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from azure.data.tables import TableClient

from shared.adapters.table_idempotency import TableIdempotencyRecords
from shared.adapters.table_order_progress import TableOrderProgress
from shared.domain.idempotency import IdempotencyRecord
from shared.domain.order_status import StepOutcome

pytestmark = pytest.mark.integration

SCOPE = "replay:orders/2026#11"  # characters a table key cannot hold as they are


def record(fingerprint: str = "f", at: str = "2026-11-23T09:00:00+00:00") -> IdempotencyRecord:
    return IdempotencyRecord(fingerprint=fingerprint, started_at=at)


def test_the_first_start_inserts_and_later_starts_find_it(table: TableClient) -> None:
    records = TableIdempotencyRecords(table)

    created, mine = records.start(SCOPE, "key/1", record())
    again, found = records.start(SCOPE, "key/1", record("other"))

    assert created and not again
    assert found == mine and found.version
    assert found.result is None


def test_of_ten_concurrent_starts_one_inserts(table: TableClient) -> None:
    records = TableIdempotencyRecords(table)
    start = threading.Barrier(10)

    def attempt(n: int) -> bool:
        start.wait()
        return records.start(SCOPE, "k", record(f"f-{n}"))[0]

    with ThreadPoolExecutor(max_workers=10) as pool:
        created = list(pool.map(attempt, range(10)))

    assert created.count(True) == 1


def test_a_finished_record_keeps_its_result(table: TableClient) -> None:
    records = TableIdempotencyRecords(table)
    _, mine = records.start(SCOPE, "k", record())

    records.finish(SCOPE, "k", IdempotencyRecord("f", mine.started_at, {"job_id": "j"}))

    assert records.start(SCOPE, "k", record())[1].result == {"job_id": "j"}


def test_a_take_over_needs_the_etag_it_read(table: TableClient) -> None:
    records = TableIdempotencyRecords(table)
    _, stale = records.start(SCOPE, "k", record())

    taken = records.take_over(SCOPE, "k", stale, record(at="later"))
    late = records.take_over(SCOPE, "k", stale, record(at="later still"))

    assert taken is not None and taken.version != stale.version
    assert late is None
    assert records.start(SCOPE, "k", record())[1].started_at == "later"


def test_a_release_deletes_only_the_record_it_read(table: TableClient) -> None:
    records = TableIdempotencyRecords(table)
    _, first = records.start(SCOPE, "k", record())
    taken = records.take_over(SCOPE, "k", first, record(at="later"))
    assert taken is not None

    records.release(SCOPE, "k", first)  # taken over since: left alone
    assert not records.start(SCOPE, "k", record())[0]

    records.release(SCOPE, "k", taken)
    assert records.start(SCOPE, "k", record())[0]


def test_order_progress_keeps_the_acceptance_and_the_latest_outcome_of_each_step(
    table: TableClient,
) -> None:
    progress = TableOrderProgress(table)
    job = "job/1#x"
    assert progress.find(job) is None

    progress.accept(job, job, "t0")
    progress.record(job, StepOutcome(3, "ProcessPayment", "failed", "Down", job, "t1"))
    progress.record(job, StepOutcome(1, "GenerateOrderNumber", "completed", None, job, "t2"))
    progress.record(job, StepOutcome(3, "ProcessPayment", "completed", None, "replay-1", "t3"))

    found = progress.find(job)
    assert found is not None
    assert (found.session_id, found.accepted_at) == (job, "t0")
    assert found.steps == (
        StepOutcome(1, "GenerateOrderNumber", "completed", None, job, "t2"),
        StepOutcome(3, "ProcessPayment", "completed", None, "replay-1", "t3"),
    )
