"""The operator console in a real headless Chromium (Debian's package, driven by Playwright)
against the whole local stack: Azurite, the Service Bus emulator, an SMTP sink and
function_app.py on the local host, exporting its telemetry to a real OTLP endpoint. The demo's
catalogue and orders are sent once, so the console has the demo's failure groups to show.

Every test saves screenshots of the pages it visits to ``.artifacts/console/`` (git-ignored), or
to the folder ``CONSOLE_SCREENSHOTS`` names: ``make screenshots`` points it at
``docs/images/console/``, the copies the README and docs/console.md show."""

from __future__ import annotations

import functools
import json
import os
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from azure.data.tables import TableClient
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from playwright.sync_api import Browser, Page, sync_playwright

from localdev.api_client import AppClient
from localdev.demo import catalogue
from localdev.demo.scenario import CATALOGUE, OUTAGE_CARDS, PlannedOrder, planned_orders
from localdev.otlp_receiver import OtlpReceiver, run_otlp_receiver
from localdev.stack import HOST_JSON, LocalStack, run_stack
from shared.adapters.azure_clients import PAYMENTS_TABLE
from shared.adapters.simulated_payments import TableSimulatedPaymentGateway
from shared.adapters.table_import_manifests import IMPORT_JOBS_TABLE, TableManifestStore
from shared.domain.import_jobs import JobManifest
from shared.telemetry.setup import telemetry, use_telemetry
from tests import polling

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / os.environ.get("CONSOLE_SCREENSHOTS", ".artifacts/console")
HOST_KEY = "console-test-host-key"
SETTINGS = {
    # The worker in the host's process: the race tests hold a replay at the app's resender in
    # this process (tests/held_replay.py).
    "LOCALDEV_WORKER_PROCESSES": "false",
    "DLQ_ARCHIVE_SCHEDULE": "*/2 * * * * *",
    "TASK_RETRY_WINDOW_SECONDS": "0.4",  # two attempts, half a second apart
    "TASK_RETRY_MIN_BACKOFF_SECONDS": "0.5",
    "TASK_RETRY_MAX_BACKOFF_SECONDS": "0.5",
    "PAYMENT_SIMULATOR_DECLINE_TOKENS": "tok_declined",
    "PAYMENT_SIMULATOR_OUTAGE_TOKENS": "",
    "FUNCTIONS_HOST_KEY": HOST_KEY,
    "FUNCTIONS_MASTER_KEY": "console-test-master-key",
}
# A script in a customer's name, and one in a field name that the processor quotes in the
# dead letter's description: both must reach the page as text.
SCRIPT_NAME = "<script>window.__pwned = 'name'</script>Eve"
SCRIPT_FIELD = "<img src=x onerror=\"window.__pwned='description'\">"


@dataclass(frozen=True)
class Demo:
    """What the demo's orders became: session id by customer name, and the hostile sessions."""

    sessions: dict[str, str]
    jobs: dict[str, str]  # job id by customer name
    hostile_order_session: str
    hostile_message_session: str
    catalogue_job: str


@dataclass(frozen=True)
class Console:
    stack: LocalStack
    api: AppClient
    demo: Demo
    payments: TableSimulatedPaymentGateway
    otlp: OtlpReceiver  # the app exports its telemetry here, as make up does to its endpoint

    @property
    def url(self) -> str:
        return self.stack.console_url


def _host_json() -> dict[str, Any]:
    document = dict(json.loads(HOST_JSON.read_text()))
    document["extensions"]["serviceBus"]["sessionIdleTimeout"] = "00:00:01"
    document["extensions"]["queues"].update(
        {"maxPollingInterval": "00:00:00.5", "visibilityTimeout": "00:00:00"}
    )
    return document


@pytest.fixture(scope="package")
def console() -> Iterator[Console]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"Debian's chromium is not at {CHROMIUM}: run make setup (as root).")
    with run_otlp_receiver() as otlp:
        use_telemetry(None)  # set up again, from the stack's settings
        settings = {**SETTINGS, "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint}
        try:
            with run_stack(overrides=settings, host_json=_host_json()) as stack:
                api = AppClient(stack.api_url, stack.function_key)
                payments = TableSimulatedPaymentGateway(
                    TableClient.from_connection_string(
                        stack.storage_connection_string, PAYMENTS_TABLE
                    )
                )
                demo = _run_demo_orders(stack, api, payments)
                yield Console(stack, api, demo, payments, otlp)
        finally:
            telemetry().shutdown()
            use_telemetry(None)


def _run_demo_orders(
    stack: LocalStack, api: AppClient, payments: TableSimulatedPaymentGateway
) -> Demo:
    run = uuid.uuid4().hex[:8]
    imported = catalogue.import_through_queue(
        CATALOGUE,
        job_id=f"console-catalogue-{run}",
        queue=stack.settings["IMPORT_QUEUE_NAME"],
        sessions=3,
        servicebus_connection_string=stack.servicebus_connection_string,
    )

    def import_done() -> bool:
        status = api.import_status(imported.job_id) or {"rows_imported": 0, "rows_failed": 0}
        return bool(status["rows_imported"] + status["rows_failed"] >= imported.rows_sent)

    # What the Spark job saves once it has sent the rows (the queue path here sends them alike).
    TableManifestStore(
        TableClient.from_connection_string(stack.storage_connection_string, IMPORT_JOBS_TABLE)
    ).save(
        JobManifest(
            imported.job_id,
            stack.settings["IMPORT_QUEUE_NAME"],
            imported.rows_read,
            imported.rows_rejected,
            imported.rows_sent,
            {f"{imported.job_id}-{k:04d}": 0 for k in range(imported.sessions)},
            source=str(CATALOGUE.name),
        )
    )
    polling.wait_for(import_done, 90, "the demo catalogue imported")
    payments.set_outage(OUTAGE_CARDS)
    orders = planned_orders()
    hostile = PlannedOrder(
        "hostile",
        {**orders[3].order, "customer_name": SCRIPT_NAME, "customer_email": "eve@example.com"},
        "ProcessPayment: PaymentDeclined",
    )
    with ThreadPoolExecutor(max_workers=6) as pool:
        accepted = list(
            pool.map(
                lambda p: api.submit_order(p.order, idempotency_key=f"console-{run}-{p.name}"),
                [*orders, hostile],
            )
        )
    sessions = {p.name: a["session_id"] for p, a in zip([*orders, hostile], accepted, strict=True)}
    jobs = {p.name: a["job_id"] for p, a in zip([*orders, hostile], accepted, strict=True)}
    hostile_message = f"console-{run}-hostile-message"
    _send_hostile_message(stack, hostile_message)
    failing = [sessions[p.name] for p in [*orders, hostile] if p.expect != "complete"]
    for session_id in [*failing, hostile_message]:
        polling.wait_for(
            functools.partial(_archived_whole, api, session_id),
            90,
            f"session {session_id} archived",
        )
    return Demo(sessions, jobs, sessions["hostile"], hostile_message, imported.job_id)


def _send_hostile_message(stack: LocalStack, session_id: str) -> None:
    body = {
        "job_id": session_id,
        "pipeline": "purchase",
        "task": "GenerateOrderNumber",
        "step": 1,
        "is_last": True,
        "payload": {},
        SCRIPT_FIELD: 1,
    }
    with (
        ServiceBusClient.from_connection_string(stack.servicebus_connection_string) as client,
        client.get_queue_sender(stack.settings["PURCHASE_QUEUE_NAME"]) as sender,
    ):
        sender.send_messages(
            ServiceBusMessage(
                json.dumps(body),
                session_id=session_id,
                content_type="application/json",
                application_properties={"pipeline": "purchase", "step": 1, "is_last": True},
            )
        )


def _archived_whole(api: AppClient, session_id: str) -> bool:
    response = api.request("GET", f"failed-sessions/{quote(session_id, safe='')}")
    return response.status == 200 and bool(response.json()["has_last"])


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh browser context (no cookies) that records CSP violations and script errors."""
    yield from _page(browser)


@pytest.fixture
def browser_page_two(browser: Browser) -> Iterator[Page]:
    """A second operator: another browser context, signed in on its own."""
    yield from _page(browser)


def _page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.console_errors = errors  # type: ignore[attr-defined]
    try:
        yield page
    finally:
        context.close()


def sign_in(page: Page, console: Console, key: str = HOST_KEY) -> None:
    page.goto(console.url)
    page.get_by_label("Function key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_load_state()


def screenshot(page: Page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
