"""Triage by time: a bulk replay or resolution of the sessions that failed between two times
(API and console), and the exports a Reader takes away: the failed sessions a filter chooses and
the audit trail of a window, as CSV (API and console, the same file). Real archive, audit trail,
tokens and replay queue (Azurite)."""

from __future__ import annotations

import csv
import dataclasses
import html
import io
import json
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import azure.functions as func
import pytest

from shared.domain.pipelines import PURCHASE_TASKS
from shared.entrypoints.bulk_http import confirm_bulk, preview_bulk, request_replay
from shared.entrypoints.console.access import csrf_token_for
from shared.entrypoints.console.bulk import console_bulk_preview
from shared.entrypoints.console.pages import console_sessions
from shared.entrypoints.console.records import console_export_audit, console_export_sessions
from shared.entrypoints.exports_http import export_audit_csv, export_failed_sessions_csv, get_audit
from shared.entrypoints.failed_sessions_http import list_failed_sessions
from shared.entrypoints.replay_queue import replay_requests
from tests.builders import NOW, dead_letter, purchase_message

from .conftest import StorageApp
from .test_dead_letters import _deliver, run_timer

pytestmark = pytest.mark.integration

KEY = "the-host-key"
BASE = "http://localhost:7071"
# Three incidents an hour apart: sessions early-1, middle-1, middle-2 and late-1.
EARLY, MIDDLE, LATE = NOW, NOW + timedelta(hours=1), NOW + timedelta(hours=2)


def _fail(app: StorageApp, session: str, at: Any, description: str | None = None) -> None:
    """A purchase that failed at ProcessPayment at ``at``, every later message archived."""
    for step in range(3, len(PURCHASE_TASKS) + 1):
        reason = "PaymentProviderUnavailable" if step == 3 else "SessionFailed"
        app.dead_letters.add(
            dead_letter(
                purchase_message(session, step),
                reason,
                queue="purchase-tasks",
                session_id=session,
                description=description if step == 3 else None,
                enqueued_time=at,
            )
        )


@pytest.fixture
def incidents(storage_app: StorageApp) -> StorageApp:
    settings = storage_app.container.settings
    console = dataclasses.replace(settings.console, keys=frozenset({KEY}))  # the host key
    storage_app.container.override(settings=dataclasses.replace(settings, console=console))
    _fail(storage_app, "early-1", EARLY)
    _fail(storage_app, "middle-1", MIDDLE, description='=HYPERLINK("http://evil.example")')
    _fail(storage_app, "middle-2", MIDDLE + timedelta(minutes=5))
    _fail(storage_app, "late-1", LATE)
    run_timer()
    return storage_app


def _call(
    function: Any, path: str, *, body: Any = None, params: dict[str, str] | None = None
) -> Any:
    headers = {"x-functions-key": KEY}
    if body is not None:
        headers["Content-Type"] = "application/json"
    return function(
        func.HttpRequest(
            method="POST" if body is not None else "GET",
            url=f"{BASE}/api/{path}",
            headers=headers,
            params=params or {},
            route_params={},
            body=json.dumps(body).encode() if body is not None else b"",
        )
    )


def _failed(app: StorageApp) -> list[str]:
    listed = json.loads(_call(list_failed_sessions, "failed-sessions").get_body())["items"]
    return sorted(item["session_id"] for item in listed)


WINDOW = {
    "failed_from": (MIDDLE - timedelta(minutes=1)).isoformat(),
    "failed_to": (MIDDLE + timedelta(minutes=30)).isoformat().replace("+00:00", "Z"),
}


def test_a_bulk_replay_by_time_window_replays_the_sessions_that_failed_in_it(
    incidents: StorageApp,
) -> None:
    accepted = _call(request_replay, "replays", body=WINDOW)
    assert accepted.status_code == 202, accepted.get_body()
    assert (
        json.loads(accepted.get_body())["failed_to"] == (MIDDLE + timedelta(minutes=30)).isoformat()
    )

    replay_requests(_deliver(incidents))

    assert _failed(incidents) == ["early-1", "late-1"]
    replayed = {session for _, session, _ in incidents.resender.sent}
    assert len(replayed) == 2


def test_a_bulk_resolution_by_window_goes_through_a_preview_of_exactly_those(
    incidents: StorageApp,
) -> None:
    preview = _call(preview_bulk, "bulk-previews", body={"action": "resolve", **WINDOW})
    assert preview.status_code == 201
    previewed = json.loads(preview.get_body())
    assert previewed["sessions"] == 2
    assert previewed["selection"]["failed_from"] == WINDOW["failed_from"]

    body = {"action": "resolve", "token": previewed["token"], "note": "provider refunded"}
    assert _call(confirm_bulk, "bulk-actions", body=body).status_code == 202
    replay_requests(_deliver(incidents))

    assert _failed(incidents) == ["early-1", "late-1"]


@pytest.mark.parametrize(
    ("window", "field"),
    [
        ({"failed_from": "yesterday"}, "failed_from"),
        ({"failed_from": "2026-11-23T09:00:00"}, "failed_from"),  # no offset
        ({"failed_from": LATE.isoformat(), "failed_to": EARLY.isoformat()}, "failed_to"),
    ],
)
def test_a_window_that_is_not_one_is_a_400_naming_its_end(
    incidents: StorageApp, window: dict[str, str], field: str
) -> None:
    for answer in (
        _call(request_replay, "replays", body=window),
        _call(list_failed_sessions, "failed-sessions", params=window),
    ):
        assert answer.status_code == 400
        assert json.loads(answer.get_body())["errors"][0]["field"] == field
    assert incidents.replay_queue.peek_messages() == []


def test_the_console_previews_a_window_read_as_utc(incidents: StorageApp) -> None:
    form = {
        "csrf_token": csrf_token_for(KEY),
        "action": "replay",
        # as the page's fields send it: no offset, UTC
        "failed_from": (MIDDLE - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M"),
        "failed_to": (MIDDLE + timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M"),
    }
    page = console_bulk_preview(
        func.HttpRequest(
            method="POST",
            url=f"{BASE}/console/bulk/preview",
            headers={
                "Cookie": f"console_key={KEY}",
                "Content-Type": "application/x-www-form-urlencoded",
            },
            params={},
            body=urlencode(form).encode(),
        )
    )

    assert page.status_code == 200, page.get_body()[:400]
    assert "Replay 2 sessions?" in page.get_body().decode()


# -- exports ------------------------------------------------------------------------------------


def _rows(response: func.HttpResponse) -> list[dict[str, str]]:
    assert response.status_code == 200, response.get_body()[:300]
    assert response.headers["Content-Type"] == "text/csv; charset=utf-8"
    assert response.headers["Content-Disposition"].startswith("attachment; filename=")
    return list(csv.DictReader(io.StringIO(response.get_body().decode("utf-8"))))


def _console_get(function: Any, path: str, params: dict[str, str]) -> Any:
    return function(
        func.HttpRequest(
            method="GET",
            url=f"{BASE}/console/{path}",
            headers={"Cookie": f"console_key={KEY}"},
            params=params,
            body=b"",
        )
    )


def test_failed_sessions_export_as_csv_with_the_filter_applied(incidents: StorageApp) -> None:
    params = {**WINDOW, "reason": "PaymentProviderUnavailable"}

    by_api = _call(export_failed_sessions_csv, "exports/failed-sessions", params=params)
    by_console = _console_get(console_export_sessions, "exports/failed-sessions", params)

    rows = _rows(by_api)
    assert [row["session_id"] for row in rows] == ["middle-1", "middle-2"]  # by failure time
    assert rows[0]["job_id"] == "job-middle-1" and rows[0]["failed_task"] == "ProcessPayment"
    assert rows[0]["message_count"] == "3" and rows[0]["status"] == "failed"
    # A description a spreadsheet would run as a formula is text.
    assert rows[0]["description"] == '\'=HYPERLINK("http://evil.example")'
    assert by_console.get_body() == by_api.get_body()
    everything = _rows(_call(export_failed_sessions_csv, "exports/failed-sessions"))
    assert len(everything) == 4


def test_the_audit_trail_is_read_and_exported_by_window(incidents: StorageApp) -> None:
    _call(request_replay, "replays", body=WINDOW)
    replay_requests(_deliver(incidents))

    read = json.loads(_call(get_audit, "audit").get_body())["entries"]
    assert sorted(e["session_id"] for e in read) == ["middle-1", "middle-2"]
    assert {(e["action"], e["role"]) for e in read} == {("bulk-replay", "Editor")}
    rows = _rows(_call(export_audit_csv, "exports/audit"))
    assert [row["session_id"] for row in rows] == [e["session_id"] for e in read]
    assert rows[0]["who"].startswith("function key ")
    console = _console_get(console_export_audit, "exports/audit", {})
    assert _rows(console) == rows
    later = _call(get_audit, "audit", params={"from": "2999-01-01T00:00:00Z"})
    assert json.loads(later.get_body())["entries"] == []


def test_the_sessions_page_shows_a_window_s_sessions_and_carries_it_on(
    incidents: StorageApp,
) -> None:
    window = {"failed_from": "2026-11-23T09:59", "failed_to": "2026-11-23T10:30"}  # UTC
    page = _console_get(console_sessions, "sessions", {"task": "ProcessPayment", **window})

    assert page.status_code == 200
    text = html.unescape(page.get_body().decode())
    assert "middle-1" in text and "middle-2" in text
    assert "early-1" not in text and "late-1" not in text
    # The export, the bulk forms and the links keep the window.
    assert "exports/failed-sessions?status=failed&task=ProcessPayment&failed_from=" in text
    assert 'name="failed_from" value="2026-11-23T09:59:00+00:00"' in text
    assert "Replay this group" in text
