from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from azure.data.tables import TableClient

from shared.adapters.table_order_numbers import TableOrderNumbers

from .conftest import Counted

pytestmark = pytest.mark.integration


def test_numbers_are_formatted_and_start_at_one(table: TableClient) -> None:
    numbers = TableOrderNumbers(table)

    assert numbers.allocate("job-a") == "ORD-00000001"
    assert numbers.allocate("job-b") == "ORD-00000002"
    assert TableOrderNumbers(table, prefix="X-").allocate("job-c") == "X-00000003"


def test_the_same_job_gets_the_same_number_again(table: TableClient) -> None:
    numbers = TableOrderNumbers(table)
    first = numbers.allocate("job/with?odd#chars")

    numbers.allocate("another job")

    assert numbers.allocate("job/with?odd#chars") == first
    # A fresh adapter over the same table (another worker) sees the same allocation.
    assert TableOrderNumbers(table).allocate("job/with?odd#chars") == first


def test_concurrent_callers_get_distinct_contiguous_numbers(table: TableClient) -> None:
    numbers = TableOrderNumbers(table)
    job_ids = [f"job-{thread}-{i}" for thread in range(8) for i in range(10)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        allocated = dict(zip(job_ids, pool.map(numbers.allocate, job_ids), strict=True))

    assert all(re.fullmatch(r"ORD-\d{8}", number) for number in allocated.values())
    assert sorted(int(number[4:]) for number in allocated.values()) == list(range(1, 81))
    # Every job keeps its number when asked again.
    assert {job: numbers.allocate(job) for job in job_ids} == allocated


def test_concurrent_calls_for_the_same_job_agree_on_one_number(table: TableClient) -> None:
    numbers = TableOrderNumbers(table)
    job_ids = [f"job-{i % 5}" for i in range(40)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(numbers.allocate, job_ids))

    by_job: dict[str, set[str]] = {}
    for job, number in zip(job_ids, results, strict=True):
        by_job.setdefault(job, set()).add(number)
    assert all(len(found) == 1 for found in by_job.values())
    # No number was burnt by the losers of a race: the five jobs hold 1..5.
    assert sorted(int(found.pop()[4:]) for found in by_job.values()) == [1, 2, 3, 4, 5]


def test_find_reads_a_jobs_number_without_allocating_one(table: TableClient) -> None:
    numbers = TableOrderNumbers(table)
    assert numbers.find("job/1") is None

    allocated = numbers.allocate("job/1")

    assert numbers.find("job/1") == allocated
    assert numbers.find("job/2") is None
    assert numbers.allocate("job/2") == "ORD-00000002"  # find took no number


def test_one_request_an_order_while_no_other_instance_allocates(
    table: TableClient, counted: Counted
) -> None:
    requests = counted.requests
    numbers, elsewhere = TableOrderNumbers(counted.table), TableOrderNumbers(table)

    first = [numbers.allocate(f"job-{n}") for n in range(4)]
    assert requests == ["GET", "POST"] + ["POST"] * 3  # read once, then one transaction each
    requests.clear()
    # Another instance allocates: this one's counter is stale, and it reads it again.
    assert elsewhere.allocate("job-elsewhere") == "ORD-00000005"
    assert numbers.allocate("job-4") == "ORD-00000006"
    assert requests == ["POST", "GET", "POST"]
    requests.clear()
    # A job that has its number: the transaction finds it taken, the read returns it.
    assert numbers.allocate("job-0") == first[0] == "ORD-00000001"
    assert numbers.allocate("job-5") == "ORD-00000007"
    assert requests == ["POST", "GET", "POST"]
