"""Storage refusing every connection for 90 s against a retry window of 60 s, in the middle of
an import and 40 orders: the sessions that had been trying since the outage began fail, once
each, with a reason that names what was out of reach and for how long; replayed once it is
back, each completes once, and nothing is charged, mailed or imported twice."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.polling import wait_for

from .scenario import ROWS, Chaos, chaos_stack, outage_in_the_middle

pytestmark = pytest.mark.e2e

STORAGE_REASONS = {"TableStorageUnavailable", "BlobStorageUnavailable"}


@pytest.fixture(scope="module")
def chaos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chaos]:
    with chaos_stack(
        tmp_path_factory.mktemp("past-window"), {"TASK_RETRY_WINDOW_SECONDS": "60"}
    ) as stack:
        yield stack


@pytest.mark.timeout(900)
def test_an_outage_longer_than_the_window_fails_each_session_once_and_a_replay_completes_it(
    chaos: Chaos,
) -> None:
    azurite = chaos.stack.azurite

    run = outage_in_the_middle(chaos, begin=azurite.stop, end=azurite.start, seconds=90)

    assert run.orders_done_before < len(run.orders) and run.rows_done_before < ROWS, run
    # every order ends, completed or failed; every row, imported or failed
    statuses = {
        job: wait_for(_ended(chaos, job), timeout=300, what=f"order {job} ended")
        for job in run.orders
    }
    imported = wait_for(
        lambda: (
            (s := chaos.imported(run.import_job))
            and s["rows_imported"] + s["rows_failed"] == ROWS
            and s
        ),
        timeout=300,
        what="every row imported or failed",
    )
    failed_orders = {job for job, status in statuses.items() if status == "failed"}

    def all_archived() -> list[dict[str, Any]] | None:
        """The failed sessions once each failed order and each failed row is among them."""
        failed = chaos.failed_sessions()
        ids = {session["session_id"] for session in failed}
        rows = sum(
            s["message_count"] for s in failed if s["queue"] == chaos.queue("product_import")
        )
        return failed if failed_orders <= ids and rows == imported["rows_failed"] else None

    failed = wait_for(all_archived, timeout=120, what="every failed session archived")
    # each failed once, naming what was out of reach and since when
    sessions = [f["session_id"] for f in failed]
    assert len(sessions) == len(set(sessions))
    for session in failed:
        assert session["reason"] in STORAGE_REASONS, session
        assert " was out of reach for " in session["description"], session
        assert (
            "since " in session["description"] and "retry window is 60 s" in session["description"]
        ), session
    assert any(status == "failed" for status in statuses.values()) or any(
        f["queue"] == chaos.queue("product_import") for f in failed
    ), "the outage failed no session: it did not outlast the window"

    for session in failed:  # the outage is over: replay each
        response = chaos.api.request(
            "POST",
            f"failed-sessions/{session['session_id']}/replay",
            headers={"Idempotency-Key": str(uuid.uuid4())},
        )
        assert response.status == 202, response.body

    for job in run.orders:
        wait_for(_ended(chaos, job, "completed"), timeout=300, what=f"order {job} completed")
        assert chaos.charges(job) == 1, job
        assert chaos.receipts(job) == 1, job
    status = wait_for(
        lambda: (s := chaos.imported(run.import_job)) and s["rows_imported"] == ROWS and s,
        timeout=300,
        what="every row imported after the replays",
    )
    assert (status["rows_failed"], status["rows_pending"]) == (0, 0), status


def _ended(chaos: Chaos, job: str, *ends: str) -> Callable[[], str | None]:
    """The order's status once it is one of ``ends`` (completed or failed by default)."""
    wanted = ends or ("completed", "failed")

    def ended() -> str | None:
        status = chaos.order_status(job)
        return status if status in wanted else None

    return ended
