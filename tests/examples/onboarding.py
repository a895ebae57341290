"""The worked example of docs/pipelines.md: customer onboarding, declared as a pipeline of
its own. CreateAccount -> ProvisionWorkspace -> SendWelcomeEmail, stopping at the first
failure, on the queue ONBOARDING_QUEUE_NAME names, started by POST /api/onboardings and
followed at GET /api/onboardings/{job_id}.

Kept under tests/ (the app does not ship it): the end-to-end test runs the local stack with
PIPELINE_MODULES=tests.examples.onboarding (its tasks: tests/examples/onboarding_tasks.py). A
pipeline of your own is declared in shared/domain/pipelines/, its tasks in
shared/service_layer/<name>_tasks.py, and ``python -m localdev.derived`` lists it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.domain.errors import InvalidInput
from shared.domain.mailboxes import parse_mailbox
from shared.domain.pipelines import FailurePolicy, Pipeline
from shared.domain.products import check_sku

CREATE_ACCOUNT = "CreateAccount"
PROVISION_WORKSPACE = "ProvisionWorkspace"
SEND_WELCOME_EMAIL = "SendWelcomeEmail"
TASKS = (CREATE_ACCOUNT, PROVISION_WORKSPACE, SEND_WELCOME_EMAIL)


def check_customer(payload: Mapping[str, Any]) -> None:
    """``{"email": ..., "name": ..., "plan": <a catalogue SKU>}``; ``InvalidInput`` names the
    field to fix."""
    for field in ("email", "name", "plan"):
        value = payload.get(field)
        if not isinstance(value, str) or not value.strip() or len(value) > 256:
            raise InvalidInput(field, "is required: text of 1 to 256 characters")
    parse_mailbox(payload["email"], field="email")
    check_sku("plan", payload["plan"])


PIPELINE = Pipeline(
    name="onboarding",
    tasks=TASKS,
    policy=FailurePolicy.STOP_ON_FAILURE,
    queue_setting="ONBOARDING_QUEUE_NAME",
    default_queue="onboarding-tasks",
    check_payload=check_customer,
    route="onboardings",
    shows=("account_id", "workspace"),
)
