"""Concurrent console actions on one session obey the replay API's exactly-once rules: of many
operators' replays and resolutions of one session exactly one is carried out and the others
are refused naming it; one form sent many times at once (a double click, a retry) replays once.
The POSTs go straight to the console, with the signed-in operator's cookie and form token, as
a browser sends them."""

from __future__ import annotations

import re
import threading
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote, urlencode

from playwright.sync_api import Page, expect

from shared.console.access import csrf_token_for
from shared.domain.archive import replay_session_id
from tests.console.conftest import HOST_KEY, Console, screenshot, sign_in

PARALLEL = 12


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # the 303 itself is the answer


def _post(url: str, form: dict[str, str]) -> int:
    request = urllib.request.Request(url, data=urlencode(form).encode(), method="POST")
    request.add_header("Cookie", f"console_key={HOST_KEY}")
    request.add_header("Content-Type", "application/x-www-form-urlencoded")
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=60) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def _in_parallel(posts: list[tuple[str, dict[str, str]]]) -> list[int]:
    start = threading.Barrier(len(posts))

    def send(post: tuple[str, dict[str, str]]) -> int:
        start.wait()
        return _post(*post)

    with ThreadPoolExecutor(max_workers=len(posts)) as pool:
        return list(pool.map(send, posts))


def test_of_many_operators_replays_and_resolutions_of_one_session_exactly_one_happens(
    console: Console,
) -> None:
    session = console.demo.hostile_order_session  # a declined card
    base = f"{console.url}/sessions/{quote(session, safe='')}"
    csrf = csrf_token_for(HOST_KEY)
    posts = [
        (
            f"{base}/{'resolve' if n % 2 else 'replay'}",
            {"csrf_token": csrf, "action_id": uuid.uuid4().hex, "note": f"operator {n}"},
        )
        for n in range(PARALLEL)
    ]

    statuses = _in_parallel(posts)

    assert statuses.count(303) == 1, statuses
    assert sorted(set(statuses)) == [303, 409], statuses
    history = console.api.request(
        "GET", f"failed-sessions/{quote(session, safe='')}/history"
    ).json()
    assert len(history["entries"]) == 1  # one operator's action, audited once
    assert len(history["replays"]) + (history["resolved"] is not None) == 1


def test_one_replay_form_sent_many_times_at_once_replays_once(console: Console, page: Page) -> None:
    session = console.demo.sessions["Katherine Johnson"]  # a declined card: it fails again
    base = f"{console.url}/sessions/{quote(session, safe='')}"
    action_id = uuid.uuid4().hex
    form = {"csrf_token": csrf_token_for(HOST_KEY), "action_id": action_id, "note": "retry"}

    statuses = _in_parallel([(f"{base}/replay", form)] * PARALLEL)

    # The first runs; the others are refused while it is in flight (409) or, once it has
    # finished, get its answer again (303): none replays a second time.
    assert set(statuses) <= {303, 409} and 303 in statuses, statuses
    history = console.api.request(
        "GET", f"failed-sessions/{quote(session, safe='')}/history"
    ).json()
    (entry,) = history["entries"]
    assert entry["new_session_id"] == replay_session_id(session, f"console:{action_id}")
    assert [r["new_session_id"] for r in history["replays"]] == [entry["new_session_id"]]

    # The card is declined again: the session's page says so by itself, once the replay's
    # dead letters are archived.
    sign_in(page, console)
    page.goto(base)
    expect(page.get_by_role("alert")).to_contain_text(
        "A replay of this session failed again", timeout=60_000
    )
    expect(page.get_by_role("status")).to_contain_text(re.compile("failed again"))
    screenshot(page, "13-failed-again")
