"""The console's read-only pages in Chromium: signing in with the key, the demo's failure
groups, a failed session's timeline; and what it refuses (no key, no CSRF token, script in
archived data)."""

from __future__ import annotations

import csv
import re
import urllib.error
import urllib.request
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote, urlencode

from azure.data.tables import TableClient
from playwright.sync_api import Page, expect

from localdev.demo import catalogue
from localdev.demo.catalogue import FIELDS
from shared.adapters.table_import_manifests import IMPORT_JOBS_TABLE, TableManifestStore
from shared.adapters.table_receipt_emails import RECEIPT_EMAILS_TABLE, TableReceiptEmails
from shared.domain.archive import row_key
from shared.domain.import_jobs import JobManifest
from shared.domain.receipt_emails import SENDING, ReceiptEmail, receipt_request_id
from tests import polling
from tests.builders import order_document
from tests.console.conftest import (
    HOST_KEY,
    SCRIPT_FIELD,
    SCRIPT_NAME,
    Console,
    screenshot,
    sign_in,
)


def _answer(
    url: str, *, data: bytes | None = None, cookie: str | None = None
) -> tuple[int, dict[str, str]]:
    request = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    if cookie:
        request.add_header("Cookie", cookie)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status), dict(response.headers)
    except urllib.error.HTTPError as error:
        return int(error.code), dict(error.headers)


def _status(url: str, *, data: bytes | None = None, cookie: str | None = None) -> int:
    return _answer(url, data=data, cookie=cookie)[0]


def test_the_console_asks_for_the_key_once_and_keeps_it_in_a_strict_http_only_cookie(
    console: Console, page: Page
) -> None:
    page.goto(console.url)
    expect(page.get_by_role("heading", level=1)).to_have_text("Sign in to the console")
    screenshot(page, "01-sign-in")

    sign_in(page, console)

    expect(page.get_by_role("heading", level=1)).to_have_text("Overview")
    (cookie,) = [c for c in page.context.cookies() if c["name"] == "console_key"]
    assert cookie["value"] == HOST_KEY
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    assert cookie["path"] == "/console"
    assert page.evaluate("document.cookie") == ""  # no script can read it
    page.goto(f"{console.url}/failures")  # the next page needs no key again
    expect(page.get_by_role("heading", level=1)).to_have_text("Failure groups")


def test_the_console_refuses_requests_without_the_key(console: Console, page: Page) -> None:
    for path in (
        "",
        "/failures",
        "/sessions",
        f"/sessions/{quote(console.demo.hostile_order_session, safe='')}",
    ):
        assert _status(f"{console.url}{path}") == 401, path
        assert _status(f"{console.url}{path}", cookie="console_key=not-a-key") == 401, path
    page.goto(console.url)
    page.get_by_label("Function key").fill("not-the-key")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("not one of this app's function keys")
    assert [c for c in page.context.cookies() if c["name"] == "console_key"] == []


def test_a_post_without_the_csrf_token_is_refused_and_does_nothing(
    console: Console, page: Page
) -> None:
    """Row A8: sign-out, replay, resolve and edit, each without the page's token and with a
    forged one, are 403s; none signs the operator out (no cookie is cleared) and the session
    acted on is as it was (no claim, no audit, no replay)."""
    cookie = f"console_key={HOST_KEY}"
    session = console.demo.sessions["Frances Allen"]  # ordered a SKU the catalogue lacks
    quoted = quote(session, safe="")
    history_path = f"failed-sessions/{quoted}/history"
    before = console.api.request("GET", history_path).json()
    summary_before = console.api.failed_session(session)
    first_row = row_key(summary_before["messages"][0]["sequence_number"])
    forms = {
        "/sign-out": {},
        f"/sessions/{quoted}/replay": {"action_id": uuid.uuid4().hex, "note": "no token"},
        f"/sessions/{quoted}/resolve": {"action_id": uuid.uuid4().hex, "note": "no token"},
        f"/sessions/{quoted}/edit": {
            "action_id": uuid.uuid4().hex,
            "note": "no token",
            f"body:{first_row}": "{}",
        },
    }
    for path, form in forms.items():
        for token in ({}, {"csrf_token": "forged"}):
            data = urlencode({**form, **token}).encode()
            status, headers = _answer(f"{console.url}{path}", data=data, cookie=cookie)
            assert status == 403, (path, token)
            assert "Set-Cookie" not in headers, (path, token)  # not signed out
    assert console.api.request("GET", history_path).json() == before
    after = console.api.failed_session(session)
    for field in ("status", "claim", "replayed_session_id"):
        assert after[field] == summary_before[field], field
    # The same sign-out form with the page's own token is carried out.
    sign_in(page, console)
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Sign in to the console")


def test_the_overview_and_the_failures_page_show_the_demo_failure_groups(
    console: Console, page: Page
) -> None:
    sign_in(page, console)
    groups = page.get_by_role("table", name=re.compile("Failed sessions by queue"))
    for task, reason in (
        ("ProcessPayment", "PaymentDeclined"),
        ("ProcessPayment", "PaymentProviderUnavailable"),
        ("CalculateTotal", "UnknownSku"),
        ("(unreadable message)", "MalformedMessage"),
    ):
        expect(
            groups.get_by_role("row").filter(has_text=task).filter(has_text=reason)
        ).to_have_count(1)
    outage = groups.get_by_role("row").filter(has_text="PaymentProviderUnavailable")
    expect(outage.get_by_role("cell").last).to_have_text("3")
    waiting = page.locator(".tiles div").filter(has_text="waiting for the archive: purchase-tasks")
    expect(waiting.locator("dd")).to_have_text(re.compile(r"^\d+\+?$"))
    screenshot(page, "02-overview")

    page.get_by_role("link", name="Failures").click()
    expect(page.get_by_role("link", name="Failures")).to_have_attribute("aria-current", "page")
    page.get_by_role("link", name="PaymentProviderUnavailable").click()
    causes = page.get_by_role("table", name=re.compile("^Root causes"))
    (cause,) = causes.get_by_role("row").filter(has_text="simulated outage").all()
    expect(cause).to_contain_text("for card <id> (simulated outage)")  # one cause, 3 cards
    expect(cause.get_by_role("cell").last).to_have_text("3")
    sessions = page.get_by_role("table", name=re.compile("^Sessions"))
    expect(sessions.get_by_role("row")).to_have_count(1 + 3)  # the header and the 3 sessions
    screenshot(page, "03-sessions")
    cause.get_by_role("link").click()
    expect(page.get_by_text(re.compile("^root cause: [0-9a-f]{12}$"))).to_be_visible()
    expect(sessions.get_by_role("row")).to_have_count(1 + 3)


def test_a_failed_session_timeline_shows_every_message_with_its_body(
    console: Console, page: Page
) -> None:
    session_id = console.demo.sessions["Barbara Liskov"]  # an outage: fails at ProcessPayment
    sign_in(page, console)
    page.goto(f"{console.url}/sessions/{quote(session_id, safe='')}")
    expect(page.get_by_role("heading", level=1)).to_contain_text(session_id)
    messages = page.get_by_role("article")
    expect(messages).to_have_count(3)  # ProcessPayment, GenerateReceipt, SendReceiptEmail
    first = messages.first
    expect(first.get_by_role("heading")).to_contain_text("Step 3 · ProcessPayment")
    expect(first).to_contain_text("PaymentProviderUnavailable")
    expect(first).to_contain_text("Delivery count")
    first.get_by_text(re.compile(r"^Body: JSON")).click()  # the keyboard works too (summary)
    expect(first.locator("pre")).to_contain_text('"card_token": "tok_amex_0005"')
    expect(messages.nth(1)).to_contain_text("SessionFailed")
    screenshot(page, "04-session")


def test_a_failed_session_page_names_the_trace_of_its_order(console: Console, page: Page) -> None:
    session_id = console.demo.sessions["Barbara Liskov"]
    sign_in(page, console)
    page.goto(f"{console.url}/sessions/{quote(session_id, safe='')}")

    trace_id = page.locator("#trace-id").inner_text()

    assert re.fullmatch(r"[0-9a-f]{32}", trace_id), trace_id
    # The OTLP endpoint received the order's spans in that trace: its POST and its tasks.
    spans = polling.wait_for(
        lambda: console.otlp.spans(trace_id) or None, 30, "the order's spans exported"
    )
    assert any(s.name == "POST /api/orders" for s in spans)
    assert {s.attributes.get("session.id") for s in spans} >= {session_id}


def test_script_in_an_order_name_or_a_dead_letter_description_is_rendered_inert(
    console: Console, page: Page
) -> None:
    sign_in(page, console)
    for session_id, text in (
        (console.demo.hostile_order_session, SCRIPT_NAME),
        (console.demo.hostile_message_session, SCRIPT_FIELD),
    ):
        page.goto(f"{console.url}/sessions/{quote(session_id, safe='')}")
        page.locator("details summary").first.click()
        expect(page.get_by_role("main")).to_contain_text(text)  # shown as text...
        assert page.locator("main script, main img").count() == 0  # ...never as markup
        assert page.evaluate("window.__pwned") is None
    page.goto(f"{console.url}/sessions?reason=MalformedMessage")
    expect(page.get_by_role("table", name=re.compile("^Sessions"))).to_contain_text(SCRIPT_FIELD)
    assert page.locator("main img").count() == 0
    assert page.evaluate("window.__pwned") is None
    assert [e for e in page.console_errors if "Content Security Policy" in e] == []  # type: ignore[attr-defined]


def test_the_pages_work_by_keyboard_from_a_skip_link(console: Console, page: Page) -> None:
    sign_in(page, console)
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to main content")).to_be_focused()
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    focused = page.evaluate("document.activeElement.closest('main') !== null")
    assert focused, "Tab after the skip link lands inside the main content"


def test_the_overview_counts_follow_new_failures_without_a_reload(
    console: Console, page: Page
) -> None:
    sign_in(page, console)
    failed = page.locator(".tiles div").filter(has_text="Failed sessions").locator("dd")
    before = int(failed.inner_text())
    page.evaluate("window.__same_page = true")
    order = order_document(
        customer_email="late@example.com",
        customer_name="Late Declined",
        card_token="tok_declined",
        lines=[{"sku": "TEA-ASSAM", "quantity": 1}],
    )
    console.api.submit_order(order, idempotency_key=f"console-live-{uuid.uuid4()}")
    expect(failed).to_have_text(str(before + 1), timeout=60_000)
    assert page.evaluate("window.__same_page") is True  # htmx swapped it in place


def test_an_order_is_found_by_its_order_number_or_its_job_id(console: Console, page: Page) -> None:
    job = console.demo.jobs["Ada Lovelace"]  # an order that completed
    number = polling.wait_for(
        lambda: console.api.request("GET", f"orders/{job}").json()["order_number"],
        60,
        "Ada's order number",
    )
    sign_in(page, console)
    page.get_by_label("Find a job").fill(number)
    page.get_by_role("button", name="Find").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Order {number}")
    expect(page.get_by_role("status")).to_contain_text("completed", timeout=60_000)
    expect(page.get_by_role("main")).to_contain_text(job)
    screenshot(page, "11-order")

    page.get_by_label("Job id or order number").fill(job)
    page.get_by_role("button", name="Find").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Order {number}")
    page.get_by_label("Job id or order number").fill("ORD-99999999")
    page.get_by_role("button", name="Find").click()
    expect(page.get_by_role("alert")).to_contain_text("There is no order 'ORD-99999999'")


def test_find_opens_any_pipelines_job_and_each_pipeline_lists_its_jobs(
    console: Console, page: Page
) -> None:
    # the catalogue import: a job of the product_import pipeline, not an order
    job = console.demo.catalogue_job
    sign_in(page, console)
    page.get_by_label("Find a job").fill(job)
    page.get_by_role("button", name="Find").click()

    expect(page.get_by_role("heading", level=1)).to_have_text(f"Job {job}")
    expect(page.get_by_role("main")).to_contain_text("Pipeline product_import")
    tasks = page.get_by_role("table", name="Each task in the job's latest session")
    expect(tasks).to_contain_text("ImportProduct")
    expect(
        page.get_by_role("table", name="The job's first session, then its replays")
    ).to_contain_text(f"{job}-")
    screenshot(page, "16-job")

    page.get_by_role("link", name="product_import").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Jobs of product_import")
    expect(page.get_by_role("table", name="Jobs of product_import")).to_contain_text(job)
    screenshot(page, "17-pipeline-jobs")
    page.get_by_role("link", name=job).click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Job {job}")

    page.goto(f"{console.url}/jobs?{urlencode({'ref': 'no-such-job'})}")
    expect(page.get_by_role("alert")).to_contain_text("No job of any pipeline has the id")


def test_an_import_job_shows_its_progress_as_its_rows_arrive(
    console: Console, page: Page, tmp_path: Path
) -> None:
    job = f"console-live-import-{uuid.uuid4().hex[:8]}"
    rows = [
        (f"LIVE-{n}", f"Live tea {n}", "4.50", "EUR", "steeped while you watch") for n in (1, 2, 3)
    ]
    source = tmp_path / "live.csv"
    with source.open("w", newline="", encoding="utf-8") as file:
        csv.writer(file).writerows([FIELDS, *rows])
    # The manifest first (the job read 3 rows), then the rows: the page shows them arrive.
    TableManifestStore(
        TableClient.from_connection_string(
            console.stack.storage_connection_string, IMPORT_JOBS_TABLE
        )
    ).save(JobManifest(job, console.stack.settings["IMPORT_QUEUE_NAME"], 3, 0, 3, {}, "live.csv"))
    sign_in(page, console)
    page.goto(f"{console.url}/imports/{quote(job, safe='')}")
    expect(page.get_by_role("status")).to_contain_text("importing")
    imported = page.locator(".tiles div").filter(has_text="Imported").locator("dd")
    expect(imported).to_have_text("0")
    page.evaluate("window.__same_page = true")

    catalogue.import_through_queue(
        source,
        job_id=job,
        queue=console.stack.settings["IMPORT_QUEUE_NAME"],
        sessions=1,
        servicebus_connection_string=console.stack.servicebus_connection_string,
    )

    expect(imported).to_have_text("3", timeout=60_000)
    expect(page.get_by_role("status")).to_contain_text("completed")
    assert page.evaluate("window.__same_page") is True  # htmx swapped the progress in place
    screenshot(page, "12-import")
    page.goto(console.url)
    expect(page.get_by_role("main")).not_to_contain_text(job)  # no longer in progress


def test_a_receipt_the_mail_service_can_no_longer_vouch_for_is_shown_for_a_person_to_decide(
    console: Console, page: Page
) -> None:
    # Given: an order that failed at its payment (the provider down for its card), archived
    card = f"tok_amex_{uuid.uuid4().hex[:8]}"
    before = console.payments.current_outage()
    console.payments.set_outage([*before, card])
    accepted = console.api.submit_order(
        order_document(card_token=card, lines=[{"sku": "TEA-ASSAM", "quantity": 1}]),
        idempotency_key=f"console-412-{uuid.uuid4()}",
    )
    job, session = accepted["job_id"], accepted["session_id"]
    failed_session = f"failed-sessions/{quote(session, safe='')}"
    polling.wait_for(
        lambda: (
            (r := console.api.request("GET", failed_session)).status == 200 and r.json()["has_last"]
        ),
        60,
        "the failed order archived",
    )
    console.payments.set_outage(before)
    # ... and a first attempt at its receipt six minutes ago whose outcome was never recorded
    # (the instance that sent it died, and nothing ran the task again within the window)
    TableReceiptEmails(
        TableClient.from_connection_string(
            console.stack.storage_connection_string, RECEIPT_EMAILS_TABLE
        )
    ).save(
        ReceiptEmail(
            job,
            "ada@example.com",
            SENDING,
            receipt_request_id(job, 5),
            datetime.now(UTC) - timedelta(minutes=6),
            "acs",
        )
    )

    # When: the session is replayed and its receipt task runs again
    replayed = console.api.request(
        "POST",
        f"{failed_session}/replay",
        headers={"Idempotency-Key": f"console-412-replay-{uuid.uuid4()}"},
    )
    assert replayed.status == 202, replayed.body

    # Then: Communication Services answers 412; the order completes, nothing is mailed, and
    # its status and the console's order page say the receipt may have been sent
    status = polling.wait_for(
        lambda: (
            (s := console.api.request("GET", f"orders/{job}").json())["status"] == "completed" and s
        ),
        60,
        "the replayed order completed",
    )
    assert status["receipt_email"]["status"] == "may-have-been-sent"
    assert "cannot tell whether it went out" in status["receipt_email"]["detail"]
    wanted = f"<{job}.receipt@pipelines.local>"
    assert [m for m in console.stack.email.received() if m["Message-ID"] == wanted] == []
    sign_in(page, console)
    page.goto(f"{console.url}/orders?{urlencode({'ref': job})}")
    decide = page.get_by_role("region", name="The receipt may have been sent: a person decides")
    expect(decide).to_contain_text("Nothing was sent again")
    expect(decide).to_contain_text(receipt_request_id(job, 5))
    expect(page.get_by_role("main")).to_contain_text("may have been sent to ada@example.com")
    screenshot(page, "14-receipt-may-have-been-sent")
