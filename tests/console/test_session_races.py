"""Concurrent console actions on one session obey the replay API's exactly-once rules: of many
operators' replays and resolutions of one session exactly one is carried out and the others
are refused naming it; one form sent many times at once (a double click, a retry) replays once.
The POSTs go straight to the console, with the signed-in operator's cookie and form token, as
a browser sends them. The first action is held in flight (``tests/held_replay.py``) while the
others are sent, so the refusals the rows name are certain, not a matter of timing."""

from __future__ import annotations

import re
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from playwright.sync_api import Page, expect

from shared.domain.archive import replay_session_id
from shared.entrypoints.console.access import csrf_token_for
from tests.console.conftest import HOST_KEY, Console, screenshot, sign_in
from tests.held_replay import replays_held

PARALLEL = 12


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # the 303 itself is the answer


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Mapping[str, str]
    body: str


def _post(url: str, form: dict[str, str]) -> Answer:
    request = urllib.request.Request(url, data=urlencode(form).encode(), method="POST")
    request.add_header("Cookie", f"console_key={HOST_KEY}")
    request.add_header("Content-Type", "application/x-www-form-urlencoded")
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=60) as response:
            return Answer(int(response.status), dict(response.headers), response.read().decode())
    except urllib.error.HTTPError as error:
        return Answer(int(error.code), dict(error.headers), error.read().decode())


def _in_parallel(posts: list[tuple[str, dict[str, str]]]) -> list[Answer]:
    start = threading.Barrier(len(posts))

    def send(post: tuple[str, dict[str, str]]) -> Answer:
        start.wait()
        return _post(*post)

    with ThreadPoolExecutor(max_workers=len(posts)) as pool:
        return list(pool.map(send, posts))


def _history(console: Console, session: str) -> dict[str, Any]:
    path = f"failed-sessions/{quote(session, safe='')}/history"
    return dict(console.api.request("GET", path).json())


def test_of_many_operators_replays_and_resolutions_of_one_session_exactly_one_happens(
    console: Console,
) -> None:
    """Row A5, as an interleaving: one operator's replay has claimed the session and is held
    at the send (``tests/held_replay.py``); the other operators' replays and resolutions, at
    once, are each refused naming it before it goes on."""
    session = console.demo.hostile_order_session  # a declined card
    base = f"{console.url}/sessions/{quote(session, safe='')}"
    csrf = csrf_token_for(HOST_KEY)
    first_action = uuid.uuid4().hex
    winner = replay_session_id(session, f"console:{first_action}")
    others = [
        (
            f"{base}/{'resolve' if n % 2 else 'replay'}",
            {"csrf_token": csrf, "action_id": uuid.uuid4().hex, "note": f"operator {n}"},
        )
        for n in range(1, PARALLEL)
    ]

    with replays_held() as held, ThreadPoolExecutor(max_workers=1) as first_operator:
        first = first_operator.submit(
            _post,
            f"{base}/replay",
            {"csrf_token": csrf, "action_id": first_action, "note": "operator 0"},
        )
        held.wait_reached()

        refused = _in_parallel(others)

        for (url, _), answer in zip(others, refused, strict=True):
            assert answer.status == 409, (url, answer.status)
            assert winner in answer.body, f"the 409 of {url} names the replay that holds it"
            assert "Retry-After" not in answer.headers  # held for good: trying again won't help
        # Nothing done by the refused: no other replay reached the send, none is audited.
        assert held.sessions == [winner]
        assert _history(console, session)["entries"] == []
        held.release()
        assert first.result(timeout=60).status == 303

    history = _history(console, session)
    (entry,) = history["entries"]  # one operator's action, audited once
    assert entry["new_session_id"] == winner
    assert [r["new_session_id"] for r in history["replays"]] == [winner]
    assert history["resolved"] is None


def test_one_replay_form_sent_many_times_at_once_replays_once(console: Console, page: Page) -> None:
    """Row A1, as an interleaving: the form's first submission is held at the send
    (``tests/held_replay.py``); the same form sent again meanwhile is a 409 "in flight" with
    ``Retry-After: 5`` that does nothing; once the first has finished, the same form gets its
    answer again (303) and sends nothing."""
    session = console.demo.sessions["Katherine Johnson"]  # a declined card: it fails again
    base = f"{console.url}/sessions/{quote(session, safe='')}"
    action_id = uuid.uuid4().hex
    winner = replay_session_id(session, f"console:{action_id}")
    form = {"csrf_token": csrf_token_for(HOST_KEY), "action_id": action_id, "note": "retry"}

    with replays_held() as held, ThreadPoolExecutor(max_workers=1) as first_click:
        first = first_click.submit(_post, f"{base}/replay", form)
        held.wait_reached()

        refused = _in_parallel([(f"{base}/replay", form)] * (PARALLEL - 1))

        for answer in refused:
            assert answer.status == 409, answer.status
            assert answer.headers["Retry-After"] == "5"
            # The winner named: the request with this form's key, still being processed.
            assert f"console:{action_id}" in answer.body
            assert "still being processed" in answer.body
        assert held.sessions == [winner]
        assert _history(console, session)["entries"] == []
        held.release()
        assert first.result(timeout=60).status == 303

    again = _post(f"{base}/replay", form)  # a retry after the first finished: its answer
    assert again.status == 303
    history = _history(console, session)
    (entry,) = history["entries"]
    assert entry["new_session_id"] == winner
    assert [r["new_session_id"] for r in history["replays"]] == [winner]

    # The card is declined again: the session's page says so by itself, once the replay's
    # dead letters are archived.
    sign_in(page, console)
    page.goto(base)
    expect(page.get_by_role("alert")).to_contain_text(
        "A replay of this session failed again", timeout=60_000
    )
    expect(page.get_by_role("status")).to_contain_text(re.compile("failed again"))
    screenshot(page, "13-failed-again")
