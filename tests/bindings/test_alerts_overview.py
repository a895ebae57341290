"""Locally, the conditions the Azure alerts fire on show on the overview (``GET /api/overview``'s
``alerts`` and the console's front page): dead letters waiting longer than the archive schedule
allows, a pipeline's failed sessions over the threshold in the window, the archive timer
failing. Each is made real: the archive timer runs against a real Azurite (and, to fail, against
a port nothing listens on), its runs are recorded in a real table, the failed sessions are in the
real archive. (A pipeline paused by its circuit: tests/unit/test_alerts.py, from the overview's
pause of each pipeline.)"""

from __future__ import annotations

import dataclasses
import html
import json
from typing import Any

import azure.functions as func
import pytest

from shared.adapters.table_archive import TableDeadLetterArchive
from shared.domain.alerts import AlertRules
from shared.entrypoints.console.pages import console_overview
from shared.entrypoints.overview_http import get_overview
from tests.fakes import InMemoryDeadLetterCounter
from tests.outages import unreachable_blobs, unreachable_tables

from .conftest import StorageApp
from .test_dead_letters import failed_session, run_timer

pytestmark = pytest.mark.integration

KEY = "the-host-key"


@pytest.fixture
def app(storage_app: StorageApp) -> StorageApp:
    """Alerts at low thresholds: more than one failed session of a pipeline in ten days (the
    builders' dead letters failed days ago), a dead letter may wait a minute."""
    settings = storage_app.container.settings
    rules = AlertRules(
        dead_letter_wait_seconds=60,
        failed_sessions_threshold=1,
        failed_sessions_window_minutes=10 * 24 * 60,
    )
    console = dataclasses.replace(settings.console, keys=frozenset({KEY}))
    storage_app.container.override(
        settings=dataclasses.replace(settings, alerts=rules, console=console)
    )
    return storage_app


def _overview() -> dict[str, Any]:
    response = get_overview(
        func.HttpRequest(method="GET", url="http://localhost:7071/api/overview", body=b"")
    )
    document: dict[str, Any] = json.loads(response.get_body())
    return document


def _page() -> str:
    response = console_overview(
        func.HttpRequest(
            method="GET",
            url="http://localhost:7071/console",
            headers={"Cookie": f"console_key={KEY}"},
            body=b"",
        )
    )
    assert response.status_code == 200
    return html.unescape(response.get_body().decode())


def _kinds() -> list[tuple[str, str]]:
    return [(a["kind"], a["subject"]) for a in _overview()["alerts"]]


def test_a_quiet_app_shows_no_alert(app: StorageApp) -> None:
    failed_session(app, "order-1")
    run_timer()

    assert _kinds() == []
    assert "No alert holds" in _page()


def test_failed_sessions_over_the_threshold_show(app: StorageApp) -> None:
    failed_session(app, "order-1")
    failed_session(app, "order-2")
    run_timer()

    assert _kinds() == [("failed_sessions", "purchase")]
    assert "2 sessions of purchase failed in the last 14400 minutes" in _page()


def test_dead_letters_the_archive_has_not_emptied_in_time_show(app: StorageApp) -> None:
    # Dead letters wait, and no archive run emptied the queues yet.
    app.container.override(dead_letter_counter=InMemoryDeadLetterCounter({"purchase-tasks": 4}))

    assert _kinds() == [("dead_letters_waiting", "purchase-tasks")]
    assert "4 dead letter(s) wait in purchase-tasks" in _page()

    run_timer()  # a run that empties them (the counter is fixed: the count stays)
    assert _kinds() == []


def test_an_archive_timer_that_fails_shows(app: StorageApp) -> None:
    run_timer()
    tables = unreachable_tables()
    working = app.container.archive
    app.container.override(
        archive=TableDeadLetterArchive(
            tables.get_table_client("deadletters"),
            tables.get_table_client("failedsessions"),
            unreachable_blobs().get_container_client("bodies"),
        )
    )
    failed_session(app, "order-1")
    with pytest.raises(Exception, match="could not be reached"):
        run_timer()
    app.container.override(archive=working)

    assert ("archive_timer_failing", "archive_dead_letters") in _kinds()
    page = _page()
    assert "The archive timer's last run failed" in page and "could not be reached" in page

    run_timer()  # it works again
    assert ("archive_timer_failing", "archive_dead_letters") not in _kinds()


def test_the_purge_timer_records_its_run_and_says_what_it_deleted(
    app: StorageApp, caplog: pytest.LogCaptureFixture
) -> None:
    from azure.functions.timer import TimerRequest

    from shared.domain.retention import Lifetimes
    from shared.entrypoints.purge_timer import purge_expired_records

    keep_everything = Lifetimes(**{name: 0 for name in Lifetimes.names()})
    settings = app.container.settings
    app.container.override(settings=dataclasses.replace(settings, retention=keep_everything))
    failed_session(app, "order-1")
    run_timer()
    caplog.set_level("INFO", logger="shared.entrypoints.purge_timer")

    purge_expired_records(TimerRequest())

    assert "purge_expired_records deleted 0 row(s) and blob(s)" in caplog.text
    run = app.container.timer_runs.find("purge_expired_records")
    assert run is not None and run.last_succeeded_at and run.last_drained_at
    assert app.container.archive.get_summary("order-1").status == "failed"
