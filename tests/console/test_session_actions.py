"""The console's actions on failed sessions in Chromium: replay one and watch it complete on its
page, audited with who did it, its span inside the console request's and linked to the failed
session's trace (a second replay of the same session is refused naming the first); edit and
replay an import row; bulk replay a group through a preview and a confirmation; resolve a
session with a note."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from azure.data.tables import TableClient
from playwright.sync_api import Page, expect

from localdev.otlp_receiver import Span
from shared.adapters.azure_clients import PRODUCTS_TABLE
from shared.adapters.table_products import TableProductCatalog
from tests import polling
from tests.console.conftest import Console, screenshot, sign_in


def _receipt_sent(console: Console, job_id: str) -> bool:
    wanted = f"<{job_id}.receipt@pipelines.local>"
    return any(str(m.get("Message-ID")) == wanted for m in console.stack.email.received())


def _replay_span(console: Console, session_id: str) -> Span | None:
    replays = [
        s
        for s in console.otlp.spans()
        if s.name == "replay session" and s.attributes.get("session.id") == session_id
    ]
    return replays[0] if replays else None


def test_an_outage_session_is_replayed_from_its_page_and_completes(
    console: Console, page: Page, browser_page_two: Page
) -> None:
    session_id = console.demo.sessions["Radia Perlman"]  # the outage broke its payment
    console.payments.reset_outage()
    sign_in(page, console)
    session_url = f"{console.url}/sessions/{quote(session_id, safe='')}"
    page.goto(session_url)
    failed_trace = page.locator("#trace-id").inner_text()
    sign_in(browser_page_two, console)
    browser_page_two.goto(session_url)  # a second operator opens the same session

    page.get_by_label("Note for the audit trail (optional)").fill("provider back up")
    page.get_by_role("button", name="Replay this session").click()

    status = page.get_by_role("status")
    expect(status).to_contain_text("Replayed as replay-")
    expect(status).to_contain_text("in progress")
    screenshot(page, "05-replay-in-progress")
    page.evaluate("window.__same_page = true")
    # The page follows the replay by itself (htmx re-reads the history) until it completes.
    expect(status).to_contain_text("completed", timeout=60_000)
    assert page.evaluate("window.__same_page") is True
    history = page.get_by_role("table", name=re.compile("What operators did"))
    expect(history.get_by_role("row").nth(1)).to_contain_text("function key")
    expect(history.get_by_role("row").nth(1)).to_contain_text("provider back up")
    screenshot(page, "05-replayed")
    polling.wait_for(lambda: _receipt_sent(console, session_id), 60, "the replayed order's receipt")
    # The replay is a span inside the console request's, linked to the failed session's trace.
    replay = polling.wait_for(
        lambda: _replay_span(console, session_id), 30, "the replay's span exported"
    )
    (request,) = polling.wait_for(
        lambda: [
            s for s in console.otlp.spans(replay.trace_id) if s.span_id == replay.parent_span_id
        ],
        30,
        "the console request's span exported (it ends after the replay's)",
    )
    assert request.name == "POST /console/sessions/{session_id}/replay"
    assert [trace_id for trace_id, _ in replay.links] == [failed_trace]

    # The second operator's form is still on screen: their replay is refused (409), naming the
    # first, and does nothing (row A2).
    history_path = f"failed-sessions/{quote(session_id, safe='')}/history"
    (first,) = console.api.request("GET", history_path).json()["entries"]
    winner = first["new_session_id"]
    with browser_page_two.expect_response(
        lambda r: r.request.method == "POST" and r.url.endswith("/replay")
    ) as refusal:
        browser_page_two.get_by_role("button", name="Replay this session").click()
    assert refusal.value.status == 409
    expect(browser_page_two.get_by_role("heading", level=1)).to_have_text(
        "The session cannot be replayed now"
    )
    expect(browser_page_two.get_by_role("alert")).to_contain_text(f"already replayed as '{winner}'")
    after = console.api.request("GET", history_path).json()
    assert [e["new_session_id"] for e in after["entries"]] == [winner]
    assert [r["new_session_id"] for r in after["replays"]] == [winner]
    assert (
        len(
            page.get_by_role("table", name=re.compile("What operators did"))
            .get_by_role("row")
            .all()
        )
        == 2
    )


def test_an_import_row_with_a_wrong_currency_is_edited_replayed_and_imported(
    console: Console, page: Page
) -> None:
    def currency_row() -> list[dict[str, Any]]:
        return console.api.failed_sessions(reason="InvalidProduct:currency")

    (bad_row,) = polling.wait_for(currency_row, 60, "the bad currency row archived")
    catalogue = TableProductCatalog(
        TableClient.from_connection_string(console.stack.storage_connection_string, PRODUCTS_TABLE)
    )
    assert catalogue.find(["SCALE-MINI"]) == {}
    sign_in(page, console)
    page.goto(f"{console.url}/sessions/{quote(bad_row['session_id'], safe='')}")
    page.get_by_role("link", name="Edit messages and replay").click()
    (editor,) = page.get_by_role("textbox", name=re.compile("ImportProduct")).all()
    expect(editor).to_contain_text('"currency": "EURO"')

    # A fix the import would refuse is refused before anything is sent, naming the field.
    editor.fill(editor.input_value().replace('"currency": "EURO"', '"currency": "EU"'))
    page.get_by_label(re.compile("^Why")).fill("currency typo in the supplier's file")
    page.get_by_role("button", name="Replay with these changes").click()
    expect(page.get_by_role("alert")).to_contain_text("payload.currency: must be a three-letter")
    screenshot(page, "06-edit-refused")

    editor = page.get_by_role("textbox", name=re.compile("ImportProduct"))
    editor.fill(editor.input_value().replace('"currency": "EU"', '"currency": "EUR"'))
    page.get_by_role("button", name="Replay with these changes").click()

    status = page.get_by_role("status")
    expect(status).to_contain_text("Replayed as replay-")
    history = page.get_by_role("table", name=re.compile("What operators did"))
    expect(history).to_contain_text("edit-and-replay")
    expect(history).to_contain_text('"EURO" → "EUR"')  # the JSON diff
    expect(history).to_contain_text("currency typo in the supplier's file")
    product = polling.wait_for(
        lambda: catalogue.find(["SCALE-MINI"]).get("SCALE-MINI"), 60, "SCALE-MINI imported"
    )
    assert product.currency == "EUR"
    expect(status).to_contain_text("completed", timeout=60_000)  # seen by the page itself
    # The archive keeps the original row.
    page.locator("details summary").first.click()
    expect(page.locator("pre").first).to_contain_text('"currency": "EURO"')
    screenshot(page, "07-edited-and-replayed")


def test_a_group_is_bulk_replayed_through_a_preview_and_a_confirmation(
    console: Console, page: Page
) -> None:
    wirth = console.demo.sessions["Niklaus Wirth"]  # an outage session
    console.payments.reset_outage()
    summary = console.api.failed_session(wirth)
    group = [
        s["session_id"]
        for s in console.api.failed_sessions(task=summary["failed_task"], reason=summary["reason"])
    ]
    assert wirth in group
    sign_in(page, console)
    page.goto(f"{console.url}/sessions/{quote(wirth, safe='')}")
    page.get_by_role("link", name=re.compile(f"{summary['reason']}$")).click()
    page.get_by_role("button", name="Replay this group…").click()

    expect(page.get_by_role("heading", level=1)).to_have_text(
        f"Replay {len(group)} session{'' if len(group) == 1 else 's'}?"
    )
    screenshot(page, "08-bulk-preview")
    form = {
        name: str(page.locator(f"main input[name={name}]").get_attribute("value"))
        for name in ("token", "csrf_token")
    }
    page.get_by_label(re.compile("^Why")).fill("payment provider back up")
    page.get_by_role("button", name=re.compile("^Confirm: replay")).click()

    expect(page.get_by_role("status")).to_contain_text("completed", timeout=60_000)
    replayed = page.locator(".tiles div").filter(has=page.get_by_text("Replayed", exact=True))
    replayed = replayed.locator("dd")
    expect(replayed).to_have_text(str(len(group)))
    screenshot(page, "09-bulk-progress")
    polling.wait_for(lambda: _receipt_sent(console, wirth), 60, "the bulk-replayed order's receipt")

    # The confirmation was used: sending it again starts nothing.
    again = page.request.post(
        f"{console.url}/bulk", form={**form, "action": "replay", "note": "again"}
    )
    assert again.status == 409
    assert "already used" in again.text()


def test_a_session_is_resolved_with_a_note_and_leaves_the_failed_list(
    console: Console, page: Page
) -> None:
    allen = console.demo.sessions["Frances Allen"]  # ordered a SKU the catalogue lacks
    sign_in(page, console)
    page.goto(f"{console.url}/sessions/{quote(allen, safe='')}")
    resolve = page.get_by_role("region", name="Resolve without replay")
    resolve.get_by_role("button", name="Resolve this session").click()
    # The note is required: the browser does not send the form without it.
    expect(page.get_by_role("heading", level=1)).to_contain_text(allen)
    resolve.get_by_label(re.compile("^Why")).fill("customer ordered the tea by phone")
    resolve.get_by_role("button", name="Resolve this session").click()

    expect(page.get_by_role("status")).to_contain_text("Resolved without a replay")
    history = page.get_by_role("table", name=re.compile("What operators did"))
    expect(history).to_contain_text("resolve")
    expect(history).to_contain_text("customer ordered the tea by phone")
    expect(page.get_by_role("button", name="Replay this session")).to_have_count(0)
    screenshot(page, "10-resolved")

    page.goto(f"{console.url}/sessions?task=CalculateTotal&reason=UnknownSku")
    expect(page.get_by_role("main")).not_to_contain_text(allen)
    page.goto(f"{console.url}/sessions?task=CalculateTotal&reason=UnknownSku&status=resolved")
    expect(page.get_by_role("table", name=re.compile("^Sessions"))).to_contain_text(allen)
    assert all(s["session_id"] != allen for s in console.api.failed_sessions(status="failed"))
