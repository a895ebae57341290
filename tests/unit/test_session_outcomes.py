"""How a session ended, recorded by the processor at the session's last message for every
pipeline: what the replay history and the generic status route read."""

from __future__ import annotations

from typing import Any

import pytest

from shared.domain.errors import PermanentTaskError
from shared.domain.session_outcomes import SessionOutcome, job_status
from shared.service_layer.processor import FailurePolicy, RetryPolicy, SessionProcessor
from tests.fakes import InMemorySessionActions, InMemorySessionOutcomes

from .test_processor import NOW, TASK_NAMES, Tasks, incoming, message

STOP = FailurePolicy.STOP_ON_FAILURE
CONTINUE = FailurePolicy.CONTINUE_ON_FAILURE


def run_session(policy: FailurePolicy, tasks: Tasks, **behaviour: Any) -> InMemorySessionOutcomes:
    """Every message of one session, in order, through a processor that records outcomes."""
    tasks.behaviour.update(behaviour)
    outcomes = InMemorySessionOutcomes()
    processor = SessionProcessor(
        pipeline="demo",
        tasks={name: tasks.make(name) for name in TASK_NAMES},
        policy=policy,
        retry=RetryPolicy(window=0),
        sleep=lambda _: None,
        clock=lambda: NOW,
        outcomes=outcomes,
    )
    actions = InMemorySessionActions()
    for step in range(1, len(TASK_NAMES) + 1):
        processor.handle(incoming(message(step)), actions)
    return outcomes


@pytest.mark.parametrize("policy", [STOP, CONTINUE], ids=["stop", "continue"])
def test_a_session_whose_tasks_all_ran_is_recorded_completed(policy: FailurePolicy) -> None:
    outcomes = run_session(policy, Tasks())

    assert outcomes.of_job("job-1") == [
        SessionOutcome("job-1", "s-1", "demo", "completed", NOW.isoformat())
    ]


def test_a_stopped_session_is_recorded_failed_with_its_first_reason_not_session_failed() -> None:
    tasks = Tasks()
    outcomes = run_session(STOP, tasks, B=PermanentTaskError("PaymentDeclined", "declined"))

    assert tasks.ran() == ["A", "B"]
    (ended,) = outcomes.of_job("job-1")
    assert (ended.status, ended.reason) == ("failed", "PaymentDeclined")


def test_a_continued_session_with_a_failed_message_is_recorded_failed() -> None:
    tasks = Tasks()
    outcomes = run_session(CONTINUE, tasks, B=PermanentTaskError("InvalidProduct:price", "bad"))

    assert tasks.ran() == ["A", "B", "C"]
    (ended,) = outcomes.of_job("job-1")
    assert (ended.status, ended.reason) == ("failed", "InvalidProduct:price")


def test_nothing_is_recorded_before_the_last_message_and_a_job_is_accepted_until_then() -> None:
    outcomes = InMemorySessionOutcomes()
    processor = SessionProcessor(
        pipeline="demo",
        tasks={name: Tasks().make(name) for name in TASK_NAMES},
        policy=STOP,
        outcomes=outcomes,
    )
    processor.handle(incoming(message(1)), InMemorySessionActions())

    assert outcomes.of_job("job-1") == []
    assert job_status(outcomes.of_job("job-1")) == "accepted"


def test_the_latest_session_to_end_decides_the_jobs_status() -> None:
    failed = SessionOutcome("job-1", "s-1", "demo", "failed", "2026-11-23T12:00:00", "Down")
    replayed = SessionOutcome("job-1", "s-1~r1", "demo", "completed", "2026-11-23T12:05:00")

    assert job_status([failed]) == "failed"
    assert job_status([replayed, failed]) == "completed"
