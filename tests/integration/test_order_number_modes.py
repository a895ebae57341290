"""Both order-number modes, gapless and blocks, across allocator processes that race each
other for the same jobs, and after one of them is killed (kill -9) in the middle of its work:
no number is held by two jobs, and a job asked again gets the number it was first given."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.data.tables import TableClient

from shared.adapters.table_order_numbers import TableBlockOrderNumbers, TableOrderNumbers

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
MODES = {"gapless": 0, "blocks": 10}


def start_allocator(connection_string: str, table: TableClient, block_size: int) -> Any:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.integration.order_number_allocator",
            connection_string,
            table.table_name,
            str(block_size),
        ],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def allocated(process: Any, jobs: list[str]) -> Iterator[tuple[str, str]]:
    """Feed the jobs, then yield each ``(job, number)`` line as the process prints it."""
    process.stdin.write("".join(f"{job}\n" for job in jobs))
    process.stdin.close()
    for line in process.stdout:
        job, number = line.split()
        yield job, number


def stored(table: TableClient) -> dict[str, str]:
    """Every allocation in the table, job -> number; fails if a number is held twice."""
    rows = [row for row in table.list_entities() if "OrderNumber" in row]
    numbers = [row["OrderNumber"] for row in rows]
    assert len(numbers) == len(set(numbers)), "a number is held by two jobs"
    by_job = {row["JobId"]: row["OrderNumber"] for row in rows}
    assert len(by_job) == len(rows), "a job holds two numbers"
    return by_job


@pytest.mark.parametrize("mode", MODES)
def test_racing_processes_give_each_job_one_number_and_no_number_twice(
    azurite_connection_string: str, table: TableClient, mode: str
) -> None:
    # Given three allocator processes, each asked for the same 40 jobs, in different orders
    jobs = [f"job-{i}" for i in range(40)]
    orders = [jobs, jobs[::-1], jobs[20:] + jobs[:20]]
    processes = [start_allocator(azurite_connection_string, table, MODES[mode]) for _ in orders]
    answers: dict[str, set[str]] = {}
    for process, order in zip(processes, orders, strict=True):
        process.stdin.write("".join(f"{job}\n" for job in order))
        process.stdin.close()
    # When they have all answered
    for process in processes:
        for line in process.stdout:
            job, number = line.split()
            answers.setdefault(job, set()).add(number)
        assert process.wait(timeout=60) == 0

    # Then every process gave each job the number the table holds for it, and no number twice
    table_numbers = stored(table)
    assert {job: {number} for job, number in table_numbers.items()} == answers
    if mode == "gapless":
        assert sorted(int(n[4:]) for n in table_numbers.values()) == list(range(1, 41))


@pytest.mark.parametrize("mode", MODES)
def test_an_allocator_killed_mid_run_leaves_no_number_twice_and_jobs_keep_theirs(
    azurite_connection_string: str, table: TableClient, mode: str
) -> None:
    # Given an allocator process that has allocated some of 200 jobs
    jobs = [f"job-{i}" for i in range(200)]
    victim = start_allocator(azurite_connection_string, table, MODES[mode])
    before: dict[str, str] = {}
    for job, number in allocated(victim, jobs):
        before[job] = number
        if len(before) == 25:
            break
    # When it is killed without a chance to clean up, in the middle of its work
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=10)
    victim.stdout.close()

    # Then another process, asked for every job, gives the jobs the killed one numbered (those
    # it said and those it had no time to say) the numbers they already have
    in_table = stored(table)
    assert before.items() <= in_table.items()
    survivor = start_allocator(azurite_connection_string, table, MODES[mode])
    after = dict(allocated(survivor, jobs))
    assert survivor.wait(timeout=120) == 0
    assert in_table.items() <= after.items()
    assert stored(table) == after
    assert len(set(after.values())) == len(jobs)


def test_the_modes_share_the_counter_so_switching_never_repeats_a_number(
    table: TableClient,
) -> None:
    # Given numbers from gapless, then from blocks, then gapless again
    first = TableOrderNumbers(table).allocate("job-a")
    blocks = TableBlockOrderNumbers(table, block_size=5)
    second = blocks.allocate("job-b")
    third = TableOrderNumbers(table).allocate("job-c")

    # Then all three are distinct, later modes start past what earlier ones took
    assert (first, second, third) == ("ORD-00000001", "ORD-00000002", "ORD-00000007")
    # And either mode finds either mode's allocation, both ways
    assert TableOrderNumbers(table).find("job-b") == second
    assert blocks.find("job-a") == first
    assert blocks.find_job(third) == "job-c"
    assert TableOrderNumbers(table).find_job(second) == "job-b"
