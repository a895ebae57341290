"""The console's actions on one failed session in Chromium: replay it and see it complete,
audited with who did it; a second replay of the same session is refused naming the first."""

from __future__ import annotations

import re
from urllib.parse import quote

from playwright.sync_api import Page, expect

from tests import polling
from tests.console.conftest import Console, screenshot, sign_in


def _receipt_sent(console: Console, job_id: str) -> bool:
    wanted = f"<{job_id}.receipt@pipelines.local>"
    return any(str(m.get("Message-ID")) == wanted for m in console.stack.mail.received())


def test_an_outage_session_is_replayed_from_its_page_and_completes(
    console: Console, page: Page, browser_page_two: Page
) -> None:
    session_id = console.demo.sessions["Radia Perlman"]  # the outage broke its payment
    console.payments.reset_outage()
    sign_in(page, console)
    session_url = f"{console.url}/sessions/{quote(session_id, safe='')}"
    page.goto(session_url)
    sign_in(browser_page_two, console)
    browser_page_two.goto(session_url)  # a second operator opens the same session

    page.get_by_label("Note for the audit trail (optional)").fill("provider back up")
    page.get_by_role("button", name="Replay this session").click()

    status = page.get_by_role("status")
    expect(status).to_contain_text("Replayed as replay-")
    history = page.get_by_role("table", name=re.compile("What operators did"))
    expect(history.get_by_role("row").nth(1)).to_contain_text("function key")
    expect(history.get_by_role("row").nth(1)).to_contain_text("provider back up")
    screenshot(page, "05-replayed")
    polling.wait_for(lambda: _receipt_sent(console, session_id), 60, "the replayed order's receipt")

    # The second operator's form is still on screen: their replay is refused, naming the first.
    browser_page_two.get_by_role("button", name="Replay this session").click()
    expect(browser_page_two.get_by_role("heading", level=1)).to_have_text(
        "The session cannot be replayed now"
    )
    expect(browser_page_two.get_by_role("alert")).to_contain_text("already replayed as")
    assert (
        len(
            page.get_by_role("table", name=re.compile("What operators did"))
            .get_by_role("row")
            .all()
        )
        == 2
    )
