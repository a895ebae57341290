"""The worked example of docs/pipelines.md end to end: the onboarding pipeline (declared in
tests/examples/onboarding.py, its tasks in tests/examples/onboarding_tasks.py) added to the
app by PIPELINE_MODULES alone, run by ``make up``'s stack as a user runs it.

Its jobs are started at POST /api/onboardings and followed at GET /api/onboardings/{job}; its
tasks run in order, each on what the earlier ones made; a failed task dead-letters the rest
unrun, the archive holds the session, and a replay from the API and one from the console
complete, which the history and the status URL say."""

from __future__ import annotations

import html
import re
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from azure.data.tables import TableClient

from localdev.api_client import AppClient
from shared.adapters.azure_clients import PRODUCTS_TABLE
from shared.adapters.table_products import TableProductCatalog
from shared.domain.products import Product
from tests import polling

from .make_up import MakeUp, free_ports

pytestmark = pytest.mark.e2e

SETTINGS = {
    "PIPELINE_MODULES": "tests.examples.onboarding",
    "DLQ_ARCHIVE_SCHEDULE": "*/2 * * * * *",
    "TASK_RETRY_WINDOW_SECONDS": "0.4",  # two attempts, half a second apart
    "TASK_RETRY_MIN_BACKOFF_SECONDS": "0.5",
    "TASK_RETRY_MAX_BACKOFF_SECONDS": "0.5",
}
TEAM, SOLO = "PLAN-TEAM", "PLAN-SOLO"  # SOLO is not in the catalogue until the test adds it


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MakeUp]:
    run = MakeUp(Path(tmp_path_factory.mktemp("onboarding")) / ".data", free_ports(), env=SETTINGS)
    try:
        yield run.wait_ready()
    finally:
        run.kill()


@pytest.fixture(scope="module")
def api(stack: MakeUp) -> AppClient:
    exports = stack.exports()
    add_plan(stack, TEAM)
    return AppClient(exports["API"], exports["KEY"])


def add_plan(stack: MakeUp, sku: str) -> None:
    table = TableClient.from_connection_string(
        stack.exports()["AzureWebJobsStorage"], PRODUCTS_TABLE
    )
    TableProductCatalog(table).upsert(Product(sku, f"Plan {sku}", Decimal("9.00"), "EUR"))


def start(api: AppClient, plan: str) -> dict[str, Any]:
    customer = {"email": "ada@example.com", "name": "Ada", "plan": plan}
    response = api.request(
        "POST", "onboardings", body=customer, headers={"Idempotency-Key": uuid.uuid4().hex}
    )
    assert response.status == 202, response.body
    started = dict(response.json())
    assert response.headers["Location"] == started["status_url"]
    return started


def status_when(api: AppClient, started: dict[str, Any], wanted: str) -> dict[str, Any]:
    """GET the job's status URL until its status is ``wanted``."""
    path = started["status_url"].removeprefix(api.api_url + "/")

    def reached() -> dict[str, Any] | None:
        response = api.request("GET", path)
        assert response.status == 200, response.body
        document = dict(response.json())
        return document if document["status"] == wanted else None

    return dict(polling.wait_for(reached, 60, f"job {started['job_id']} {wanted}", 0.3))


def tasks_run(stack: MakeUp, job_id: str) -> list[str]:
    """The tasks the processor completed for the job, in the order its log says."""
    pattern = re.compile(rf"job={re.escape(job_id)} task=(\w+) step=\d+ outcome=completed\b")
    return [m.group(1) for line in stack.lines if (m := pattern.search(line))]


def archived(api: AppClient, session_id: str) -> dict[str, Any]:
    def whole() -> dict[str, Any] | None:
        response = api.request("GET", f"failed-sessions/{urllib.parse.quote(session_id, safe='')}")
        document = dict(response.json()) if response.status == 200 else None
        return document if document and document["has_last"] else None

    return dict(polling.wait_for(whole, 60, f"session {session_id} archived", 0.3))


def history_says(api: AppClient, session_id: str, outcome: str) -> dict[str, Any]:
    path = f"failed-sessions/{urllib.parse.quote(session_id, safe='')}/history"

    def said() -> dict[str, Any] | None:
        document = dict(api.request("GET", path).json())
        replays = document["replays"]
        return document if replays and replays[-1]["outcome"] == outcome else None

    return dict(polling.wait_for(said, 60, f"the history of {session_id} says {outcome}", 0.3))


def test_a_job_runs_its_tasks_in_order_each_on_what_the_earlier_made(
    stack: MakeUp, api: AppClient
) -> None:
    started = start(api, TEAM)
    job = started["job_id"]
    assert started["tasks"] == ["CreateAccount", "ProvisionWorkspace", "SendWelcomeEmail"]

    done = status_when(api, started, "completed")

    assert [s["status"] for s in done["sessions"]] == ["completed"]
    assert tasks_run(stack, job) == ["CreateAccount", "ProvisionWorkspace", "SendWelcomeEmail"]
    # The workspace is named after the account CreateAccount made: the tasks ran in order.
    welcome = f"[email] Welcome to ws-acct-{job} -> ada@example.com"
    polling.wait_for(lambda: welcome in stack.lines, 10, "the welcome mail")


def test_a_payload_the_pipeline_refuses_is_a_problem_naming_the_field(api: AppClient) -> None:
    response = api.request(
        "POST", "onboardings", body={"email": "not an address", "name": "Ada", "plan": TEAM}
    )

    assert response.status == 400
    assert response.headers["Content-Type"] == "application/problem+json"
    assert [e["field"] for e in response.json()["errors"]] == ["email"]


def test_a_failed_task_dead_letters_the_rest_unrun_and_replays_from_the_api_and_the_console(
    stack: MakeUp, api: AppClient
) -> None:
    by_api, by_console = start(api, SOLO), start(api, SOLO)
    for started in (by_api, by_console):
        failed = status_when(api, started, "failed")
        assert failed["reason"] == "UnknownPlan"
        session = archived(api, started["session_id"])
        assert [(m["task"], m["reason"]) for m in session["messages"]] == [
            ("ProvisionWorkspace", "UnknownPlan"),
            ("SendWelcomeEmail", "SessionFailed"),
        ]
        assert tasks_run(stack, started["job_id"]) == ["CreateAccount"]

    add_plan(stack, SOLO)  # the fix the dead letter's description asks for

    replayed = api.replay(by_api["session_id"], idempotency_key=uuid.uuid4().hex)
    assert replayed["status_url"] == by_api["status_url"]
    status_when(api, by_api, "completed")
    assert history_says(api, by_api["session_id"], "completed")["failed_again"] is False

    replay_from_the_console(stack, by_console["session_id"])
    history = history_says(api, by_console["session_id"], "completed")
    assert history["entries"][0]["action"] == "replay"
    status_when(api, by_console, "completed")
    for started in (by_api, by_console):
        job = started["job_id"]
        assert tasks_run(stack, job) == [
            "CreateAccount",
            "ProvisionWorkspace",
            "SendWelcomeEmail",
        ]


class _Stay(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # the 303 comes back as it is


def replay_from_the_console(stack: MakeUp, session_id: str) -> None:
    """Sign in with the host key, open the session's page, press its Replay button (a form
    POST with the page's CSRF token and action id); the console answers with a 303 to the
    session's page."""
    exports = stack.exports()
    console = exports["API"].removesuffix("/api") + "/console"
    browser = urllib.request.build_opener(_Stay)

    def post(url: str, form: dict[str, str], cookie: str = "") -> urllib.error.HTTPError:
        request = urllib.request.Request(
            url, data=urllib.parse.urlencode(form).encode(), headers={"Cookie": cookie}
        )
        with pytest.raises(urllib.error.HTTPError) as answered:
            browser.open(request, timeout=30)
        assert answered.value.code == 303, answered.value.read()
        return answered.value

    signed_in = post(f"{console}/sign-in", {"key": exports["KEY"]})
    cookie = signed_in.headers["Set-Cookie"].split(";")[0]
    page_url = f"{console}/sessions/{urllib.parse.quote(session_id, safe='')}"
    with browser.open(
        urllib.request.Request(page_url, headers={"Cookie": cookie}), timeout=30
    ) as r:
        page = r.read().decode()
    form = re.search(
        r'action="([^"]+/replay)".*?name="csrf_token" value="([^"]+)".*?'
        r'name="action_id" value="([^"]+)"',
        page,
        re.DOTALL,
    )
    assert form, page
    action = urllib.parse.urljoin(page_url, html.unescape(form.group(1)))
    fields = {"csrf_token": form.group(2), "action_id": form.group(3), "note": "plan added"}
    replayed = post(action, fields, cookie)
    assert urllib.parse.urljoin(action, replayed.headers["Location"]) == page_url
