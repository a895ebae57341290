"""Session outcomes on a real Azurite: recorded, read back, overwritten when recorded again,
and a job's sessions read as one partition, oldest first."""

from __future__ import annotations

import pytest
from azure.data.tables import TableClient

from shared.adapters.table_session_outcomes import TableSessionOutcomes
from shared.domain.session_outcomes import SessionOutcome

pytestmark = pytest.mark.integration


def test_a_jobs_sessions_are_read_back_oldest_first_and_recording_again_overwrites(
    table: TableClient,
) -> None:
    outcomes = TableSessionOutcomes(table)
    job = "job/1 'quoted'"  # a key Table Storage would refuse unescaped
    first = SessionOutcome(job, "s/1", "demo", "failed", "2026-11-23T12:00:00", "Down")
    replay = SessionOutcome(job, "s/1~r", "demo", "failed", "2026-11-23T12:05:00", "Down")
    outcomes.record(replay)
    outcomes.record(first)
    again = SessionOutcome(job, "s/1~r", "demo", "completed", "2026-11-23T12:06:00")
    outcomes.record(again)

    assert outcomes.of_job(job) == [first, again]
    assert outcomes.find(job, "s/1") == first
    assert outcomes.find(job, "no-such-session") is None
    assert outcomes.of_job("no-such-job") == []


def test_accepting_a_session_never_overwrites_its_end(table: TableClient) -> None:
    outcomes = TableSessionOutcomes(table)
    ended = SessionOutcome("job-1", "s-1", "demo", "completed", "2026-11-23T12:00:01")
    outcomes.record(ended)

    outcomes.accept(SessionOutcome("job-1", "s-1", "demo", "accepted", "2026-11-23T12:00:00"))
    outcomes.accept(SessionOutcome("job-2", "s-2", "demo", "accepted", "2026-11-23T12:00:00"))

    assert outcomes.find("job-1", "s-1") == ended
    assert [o.status for o in outcomes.of_job("job-2")] == ["accepted"]


def test_the_latest_session_of_each_job_of_a_pipeline_follows_what_is_written_since(
    table: TableClient,
) -> None:
    outcomes = TableSessionOutcomes(table)
    outcomes.record(SessionOutcome("o/1", "o/1", "purchase", "failed", "2026-11-23T12:00", "X"))
    outcomes.record(SessionOutcome("o/2", "o/2", "purchase", "completed", "2026-11-23T12:00"))
    outcomes.record(SessionOutcome("i/1", "i/1", "product_import", "completed", "2026-11-23"))
    first = outcomes.latest_of_pipeline("purchase", up_to=10)
    assert {job: o.status for job, o in first.items()} == {"o/1": "failed", "o/2": "completed"}

    # a replay of o/1 completes; a new order fails
    outcomes.record(SessionOutcome("o/1", "o/1~r", "purchase", "completed", "2026-11-23T12:05"))
    outcomes.record(SessionOutcome("o/3", "o/3", "purchase", "failed", "2026-11-23T12:06", "Y"))

    latest = outcomes.latest_of_pipeline("purchase", up_to=10)
    assert {job: (o.session_id, o.status) for job, o in latest.items()} == {
        "o/1": ("o/1~r", "completed"),
        "o/2": ("o/2", "completed"),
        "o/3": ("o/3", "failed"),
    }
    assert list(outcomes.latest_of_pipeline("purchase", up_to=2)) == ["o/1", "o/2"]
