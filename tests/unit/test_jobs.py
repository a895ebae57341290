"""The generic start and status of a declared pipeline's jobs (POST /api/<route>,
GET /api/<route>/{job_id}): the payload checked before anything is sent, every task sent in
order as one session, the job accepted until the processor records how its session ended."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from shared.bootstrap import app_pipelines
from shared.domain.errors import InvalidInput
from shared.domain.idempotency import IdempotencyKeyReused
from shared.domain.pipelines import PURCHASE
from shared.domain.session_outcomes import JobNotFound, SessionOutcome
from shared.service_layer.idempotency import IdempotentRequests
from shared.service_layer.job_status import get_job
from shared.service_layer.jobs import (
    SessionAcceptance,
    job_ids,
    resumed_job_id,
    start_job,
)
from tests.builders import PIPELINES
from tests.fakes import InMemoryIdempotencyRecords, InMemorySessionOutcomes, InMemoryTaskSender

ONBOARDING = app_pipelines({"PIPELINE_MODULES": "tests.examples.onboarding"}).declared.get(
    "onboarding"
)
T0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
CUSTOMER = {"email": "ada@example.com", "name": "Ada", "plan": "PLAN-TEAM"}


def test_a_job_is_its_tasks_in_order_as_one_session_and_is_accepted_until_it_ends() -> None:
    sender, outcomes = InMemoryTaskSender(), InMemorySessionOutcomes()

    job = start_job(
        ONBOARDING,
        CUSTOMER,
        sender=sender,
        queue_name="q",
        acceptance=SessionAcceptance(outcomes, ONBOARDING),
        clock=lambda: T0,
    )

    ((queue, session, messages),) = sender.sessions
    assert (queue, session) == ("q", job.job_id)
    assert [(m.task, m.step, m.is_last) for m in messages] == [
        ("CreateAccount", 1, False),
        ("ProvisionWorkspace", 2, False),
        ("SendWelcomeEmail", 3, True),
    ]
    assert get_job(ONBOARDING, outcomes, job.job_id).status == "accepted"
    ended = (T0 + timedelta(seconds=3)).isoformat()
    outcomes.record(SessionOutcome(job.job_id, session, "onboarding", "completed", ended))
    assert get_job(ONBOARDING, outcomes, job.job_id).status == "completed"


def test_a_payload_the_pipeline_refuses_is_refused_naming_the_field_and_nothing_is_sent() -> None:
    sender, outcomes = InMemoryTaskSender(), InMemorySessionOutcomes()

    with pytest.raises(InvalidInput) as refused:
        start_job(
            ONBOARDING,
            {**CUSTOMER, "plan": "no spaces"},
            sender=sender,
            queue_name="q",
            acceptance=SessionAcceptance(outcomes, ONBOARDING),
        )

    assert refused.value.field == "plan"
    assert sender.sessions == []


def test_a_repeated_idempotency_key_is_the_same_job_sent_once() -> None:
    sender, outcomes = InMemoryTaskSender(), InMemorySessionOutcomes()
    requests = IdempotentRequests(InMemoryIdempotencyRecords())

    def start(payload: dict[str, str]) -> str:
        job = start_job(
            ONBOARDING,
            payload,
            sender=sender,
            queue_name="q",
            acceptance=SessionAcceptance(outcomes, ONBOARDING),
            idempotency_key="k-1",
            requests=requests,
        )
        return job.job_id

    assert start(CUSTOMER) == start(CUSTOMER)
    assert len(sender.sessions) == 1
    with pytest.raises(IdempotencyKeyReused):
        start({**CUSTOMER, "name": "Alan"})


def test_a_job_nothing_was_recorded_of_is_not_found() -> None:
    with pytest.raises(JobNotFound):
        get_job(ONBOARDING, InMemorySessionOutcomes(), "never-started")


def test_job_ids_are_derived_as_every_release_derived_them() -> None:
    # The releases' namespaces, written out: a change to either is a change to a stored shape
    # (docs/deploy.md, "Stored shapes")
    now = uuid.UUID("0b6f3c1e-2f4e-4d8e-9a57-7d1f2b8c4e90")
    earlier_purchases = uuid.UUID("6f1c6f55-6a55-4f1e-9d55-3c3f0d5c2a11")
    purchase = PIPELINES.get(PURCHASE)

    assert job_ids(purchase, "k-1") == (
        str(uuid.uuid5(now, "purchase:k-1")),
        str(uuid.uuid5(earlier_purchases, "k-1")),
    )
    assert job_ids(ONBOARDING, "k-1") == (str(uuid.uuid5(now, "onboarding:k-1")),)
    earlier = job_ids(purchase, "k-1")[1]
    assert resumed_job_id(purchase, "k-1", lambda job_id: job_id == earlier) == earlier
    assert resumed_job_id(purchase, "k-1", lambda job_id: False) == job_ids(purchase, "k-1")[0]
