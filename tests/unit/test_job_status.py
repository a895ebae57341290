"""A job's status, for any pipeline: each task's state in its latest session, the failed task
and its reason, and the outputs its declaration shows, from what the processor records (the
session outcomes and the failure record), run here on the onboarding example's tasks."""

from __future__ import annotations

from decimal import Decimal

from shared.domain.pipelines import FailurePolicy
from shared.domain.products import Product
from shared.service_layer.job_status import get_job
from shared.service_layer.jobs import SessionAcceptance, start_job
from shared.service_layer.processor import IncomingMessage, SessionProcessor
from tests.examples.onboarding import PIPELINE as ONBOARDING
from tests.examples.onboarding_tasks import build_tasks
from tests.fakes import (
    InMemoryDeadLetterArchive,
    InMemoryEmailSender,
    InMemoryProductCatalog,
    InMemorySessionActions,
    InMemorySessionOutcomes,
    InMemoryTaskSender,
)

PLAN = Product("PLAN-TEAM", "Team plan", Decimal("10.00"), "EUR")


def run_job(plan: str) -> tuple[str, InMemorySessionOutcomes, InMemoryDeadLetterArchive]:
    """Start an onboarding job for ``plan`` and run its messages through its processor."""
    sender, outcomes, archive = (
        InMemoryTaskSender(),
        InMemorySessionOutcomes(),
        InMemoryDeadLetterArchive(),
    )
    job = start_job(
        ONBOARDING,
        {"email": "ada@example.com", "name": "Ada", "plan": plan},
        sender=sender,
        queue_name="onboarding-tasks",
        acceptance=SessionAcceptance(outcomes, ONBOARDING),
    )
    processor = SessionProcessor(
        pipeline=ONBOARDING.name,
        tasks=build_tasks(InMemoryProductCatalog([PLAN]), InMemoryEmailSender()),
        policy=ONBOARDING.policy,
        journal=archive,
        outcomes=outcomes,
        shows=ONBOARDING.shows,
    )
    actions = InMemorySessionActions()
    ((_, session, messages),) = sender.sessions
    for message in messages:
        incoming = IncomingMessage(
            message.to_json(), session, None, None, message.application_properties()
        )
        processor.handle(incoming, actions)
    return job.job_id, outcomes, archive


def test_a_completed_job_shows_every_task_completed_and_the_declared_outputs() -> None:
    job_id, outcomes, archive = run_job("PLAN-TEAM")

    job = get_job(ONBOARDING, outcomes, job_id, failures=archive)

    assert job.status == "completed"
    assert [(t.task, t.state) for t in job.tasks] == [
        ("CreateAccount", "completed"),
        ("ProvisionWorkspace", "completed"),
        ("SendWelcomeEmail", "completed"),
    ]
    assert job.failed is None
    assert job.outputs == {"account_id": f"acct-{job_id}", "workspace": f"ws-acct-{job_id}"}


def test_a_failed_job_names_the_failed_task_and_why_and_what_did_not_run() -> None:
    job_id, outcomes, archive = run_job("PLAN-NONE")

    job = get_job(ONBOARDING, outcomes, job_id, failures=archive)

    assert (job.status, job.reason) == ("failed", "UnknownPlan")
    assert [(t.task, t.state) for t in job.tasks] == [
        ("CreateAccount", "completed"),
        ("ProvisionWorkspace", "failed"),
        ("SendWelcomeEmail", "not-run"),
    ]
    assert job.failed is not None
    assert (job.failed.task, job.failed.step, job.failed.reason) == (
        "ProvisionWorkspace",
        2,
        "UnknownPlan",
    )
    assert "PLAN-NONE" in job.failed.description
    assert job.outputs == {"account_id": f"acct-{job_id}"}  # what ran before the failure


def test_a_running_job_has_every_task_pending() -> None:
    outcomes = InMemorySessionOutcomes()
    job = start_job(
        ONBOARDING,
        {"email": "ada@example.com", "name": "Ada", "plan": "PLAN-TEAM"},
        sender=InMemoryTaskSender(),
        queue_name="q",
        acceptance=SessionAcceptance(outcomes, ONBOARDING),
    )

    state = get_job(ONBOARDING, outcomes, job.job_id)

    assert state.status == "accepted"
    assert {t.state for t in state.tasks} == {"pending"}
    assert ONBOARDING.policy is FailurePolicy.STOP_ON_FAILURE
