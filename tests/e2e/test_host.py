"""The Functions host semantics as function_app.py meets them on the local stack: function keys
on the HTTP API, the archive timer's schedule, and the poison queue of the bulk replay trigger.
(The same semantics on a small sample app, with settings only a test would choose, such as a
2-second lock, are in packages/functions-local-host/tests.)"""

from __future__ import annotations

import base64
import itertools
import time
from datetime import datetime

import pytest
from azure.storage.queue import QueueClient

from .conftest import ARCHIVE_EVERY_SECONDS, E2E, MAX_DEQUEUE_COUNT, order, wait_for

pytestmark = pytest.mark.e2e


def test_the_http_api_answers_401_without_a_valid_function_key(e2e: E2E) -> None:
    for method, path, body in (
        ("POST", "orders", order()),
        ("GET", "failed-sessions", None),
        ("GET", "failed-session-groups", None),
        ("POST", "failed-sessions/x/replay", None),
        ("GET", "imports/x", None),
    ):
        assert e2e.api.request(method, path, body=body, with_key=False).status == 401, path
        wrong = e2e.api.request(
            method, path, body=body, with_key=False, headers={"x-functions-key": "wrong"}
        )
        assert wrong.status == 401, path
    by_query = e2e.api.request(
        "GET", "failed-session-groups", with_key=False, params={"code": e2e.stack.function_key}
    )
    assert by_query.status == 200


def test_the_archive_timer_fires_on_its_ncrontab_schedule_one_run_at_a_time(e2e: E2E) -> None:
    runs = wait_for(
        lambda: (
            len(done := [r for r in e2e.invocations.of("archive_dead_letters") if r.ended]) >= 3
            and done[-3:]
        ),
        timeout=40,
        what="three archive runs",
    )
    fired = [datetime.fromisoformat(r.reason.removeprefix("Timer fired at ")) for r in runs]
    # "*/2 * * * * *": every occurrence is on an even second, and no run starts before it.
    assert all(t.second % ARCHIVE_EVERY_SECONDS == 0 and t.microsecond == 0 for t in fired)
    assert all(r.started >= t.timestamp() for r, t in zip(runs, fired, strict=True))
    for before, after in itertools.pairwise(runs):
        assert before.ended is not None and after.started >= before.ended, "two runs overlapped"
        # An archive run can outlast the 2 s interval: the missed occurrences collapse into
        # one run that starts at once, not at the next occurrence after that.
        assert after.started - max(before.ended, fired[runs.index(after)].timestamp()) < 1.0
    assert all(r.succeeded for r in runs)


def test_a_bulk_replay_message_that_keeps_failing_goes_to_the_poison_queue(e2e: E2E) -> None:
    queue = e2e.stack.settings["REPLAY_QUEUE_NAME"]
    connection = e2e.stack.storage_connection_string
    before = len(e2e.invocations.of("replay_requests"))
    text = f"not a replay request {time.time()}"
    QueueClient.from_connection_string(connection, queue).send_message(
        base64.b64encode(text.encode()).decode()
    )
    poison = QueueClient.from_connection_string(connection, f"{queue}-poison")

    moved = wait_for(
        lambda: [
            m
            for m in poison.peek_messages(max_messages=32)
            if base64.b64decode(m.content).decode() == text
        ],
        timeout=30,
        what="the message in the poison queue",
    )

    assert len(moved) == 1
    runs = e2e.invocations.of("replay_requests")[before:]
    assert len(runs) == MAX_DEQUEUE_COUNT and not any(r.succeeded for r in runs)
