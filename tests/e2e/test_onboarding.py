"""The worked example of docs/pipelines.md end to end: the onboarding pipeline (declared in
tests/examples/onboarding.py, its tasks in tests/examples/onboarding_tasks.py) added to the
app by PIPELINE_MODULES alone, run by ``make up``'s stack as a user runs it.

Its jobs are started at POST /api/onboardings and followed at GET /api/onboardings/{job}; its
tasks run in order, each on what the earlier ones made; a failed task dead-letters the rest
unrun, the archive holds the session, and a replay from the API and one from the console
complete, which the history and the status URL say."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from azure.data.tables import TableClient

from shared.adapters.azure_clients import PRODUCTS_TABLE
from shared.adapters.table_products import TableProductCatalog
from shared.domain.products import Product
from tests import polling
from tests.pipeline_testing import (
    PipelineStack,
    archived,
    history_says,
    pipeline_stack,
    replay_from_the_api,
    replay_from_the_console,
    start,
    status_when,
    tasks_run,
)

pytestmark = pytest.mark.e2e

stack = pipeline_stack({"PIPELINE_MODULES": "tests.examples.onboarding"})
TEAM, SOLO = "PLAN-TEAM", "PLAN-SOLO"  # SOLO is not in the catalogue until the test adds it
TASKS = ["CreateAccount", "ProvisionWorkspace", "SendWelcomeEmail"]


def add_plan(stack: PipelineStack, sku: str) -> None:
    table = TableClient.from_connection_string(stack.storage, PRODUCTS_TABLE)
    TableProductCatalog(table).upsert(Product(sku, f"Plan {sku}", Decimal("9.00"), "EUR"))


def onboard(stack: PipelineStack, plan: str) -> dict[str, Any]:
    return start(
        stack.api, "onboardings", {"email": "ada@example.com", "name": "Ada", "plan": plan}
    )


def test_a_job_runs_its_tasks_in_order_each_on_what_the_earlier_made(
    stack: PipelineStack,
) -> None:
    add_plan(stack, TEAM)
    started = onboard(stack, TEAM)
    job = started["job_id"]
    assert started["tasks"] == TASKS

    done = status_when(stack.api, started, "completed")

    assert [s["status"] for s in done["sessions"]] == ["completed"]
    assert [(t["task"], t["state"]) for t in done["tasks"]] == [(t, "completed") for t in TASKS]
    assert done["outputs"] == {"account_id": f"acct-{job}", "workspace": f"ws-acct-{job}"}
    assert tasks_run(stack, job) == TASKS
    # The workspace is named after the account CreateAccount made: the tasks ran in order.
    welcome = f"[email] Welcome to ws-acct-{job} -> ada@example.com"
    polling.wait_for(lambda: welcome in stack.lines, 10, "the welcome mail")


def test_a_payload_the_pipeline_refuses_is_a_problem_naming_the_field(
    stack: PipelineStack,
) -> None:
    response = stack.api.request(
        "POST", "onboardings", body={"email": "not an address", "name": "Ada", "plan": TEAM}
    )

    assert response.status == 400
    assert response.headers["Content-Type"] == "application/problem+json"
    assert [e["field"] for e in response.json()["errors"]] == ["email"]


def test_a_failed_task_dead_letters_the_rest_unrun_and_replays_from_the_api_and_the_console(
    stack: PipelineStack,
) -> None:
    by_api, by_console = onboard(stack, SOLO), onboard(stack, SOLO)
    for started in (by_api, by_console):
        failed = status_when(stack.api, started, "failed")
        assert failed["reason"] == "UnknownPlan"
        assert [t["state"] for t in failed["tasks"]] == ["completed", "failed", "not-run"]
        assert failed["failed"]["task"] == "ProvisionWorkspace"
        session = archived(stack.api, started["session_id"])
        assert [(m["task"], m["reason"]) for m in session["messages"]] == [
            ("ProvisionWorkspace", "UnknownPlan"),
            ("SendWelcomeEmail", "SessionFailed"),
        ]
        assert tasks_run(stack, started["job_id"]) == ["CreateAccount"]

    add_plan(stack, SOLO)  # the fix the dead letter's description asks for

    replayed = replay_from_the_api(stack.api, by_api["session_id"])
    assert replayed["status_url"] == by_api["status_url"]
    status_when(stack.api, by_api, "completed")
    assert history_says(stack.api, by_api["session_id"], "completed")["failed_again"] is False

    replay_from_the_console(stack, by_console["session_id"], note="plan added")
    history = history_says(stack.api, by_console["session_id"], "completed")
    assert history["entries"][0]["action"] == "replay"
    status_when(stack.api, by_console, "completed")
    for started in (by_api, by_console):
        assert tasks_run(stack, started["job_id"]) == TASKS
