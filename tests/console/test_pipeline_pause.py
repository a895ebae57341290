"""Pausing a pipeline from the console's overview and resuming it: while it is paused an
order is accepted and waits, nothing of it runs, the overview says who paused it and why;
resumed, the order completes. Both are audited with the operator and the note."""

from __future__ import annotations

import time
import uuid

from playwright.sync_api import Page, expect

from tests import polling
from tests.builders import order_document
from tests.console.conftest import Console, screenshot, sign_in


def test_a_pipeline_paused_from_the_console_runs_nothing_until_it_is_resumed(
    console: Console, page: Page
) -> None:
    sign_in(page, console)
    page.get_by_label("purchase: why (required, kept in the audit trail)").fill(
        "payment provider maintenance"
    )
    page.get_by_role("button", name="Pause purchase").click()
    try:
        banner = page.locator(".banner.paused")
        expect(banner).to_contain_text("purchase paused:")
        expect(banner).to_contain_text("payment provider maintenance")
        job = console.api.submit_order(
            order_document(lines=[{"sku": "TEA-ASSAM", "quantity": 1}]),
            idempotency_key=f"console-paused-{uuid.uuid4()}",
        )["job_id"]
        time.sleep(4)  # long enough for its first task to have run, were it not paused
        assert console.api.request("GET", f"orders/{job}").json()["status"] == "accepted"
        screenshot(page, "15-pipeline-paused")

        page.get_by_label("purchase: why (required, kept in the audit trail)").fill(
            "maintenance over"
        )
        page.get_by_role("button", name="Resume purchase").click()
        expect(page.locator(".banner.paused")).to_have_count(0)
    finally:
        console.api.request("POST", "pipelines/purchase/resume", body={"note": "the test ends"})

    polling.wait_for(
        lambda: console.api.request("GET", f"orders/{job}").json()["status"] == "completed",
        60,
        "the order completed once the pipeline resumed",
    )
    history = console.api.request("GET", "pipelines/purchase").json()["history"]
    assert [(h["action"], h["note"]) for h in history][-2:] == [
        ("pause", "payment provider maintenance"),
        ("resume", "maintenance over"),
    ]
    assert all(h["who"] and h["role"] for h in history[-2:])
