"""A failed session as the archive holds it, what its history says, and its replay from the
API (an Idempotency-Key) or from the console (signed in with the host key, the session page's
Replay button: a form POST with its CSRF token)."""

from __future__ import annotations

import html
import re
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any

import pytest

from localdev.api_client import AppClient
from tests import polling

from .stack import PipelineStack


def archived(api: AppClient, session_id: str, timeout: float = 60) -> dict[str, Any]:
    """The failed session once the archive holds its last message."""

    def whole() -> dict[str, Any] | None:
        response = api.request("GET", f"failed-sessions/{urllib.parse.quote(session_id, safe='')}")
        document = dict(response.json()) if response.status == 200 else None
        return document if document and document["has_last"] else None

    return dict(polling.wait_for(whole, timeout, f"session {session_id} archived", 0.3))


def history_says(
    api: AppClient, session_id: str, outcome: str, timeout: float = 60
) -> dict[str, Any]:
    """The session's history once its latest replay's outcome is ``outcome``."""
    path = f"failed-sessions/{urllib.parse.quote(session_id, safe='')}/history"

    def said() -> dict[str, Any] | None:
        document = dict(api.request("GET", path).json())
        replays = document["replays"]
        return document if replays and replays[-1]["outcome"] == outcome else None

    return dict(polling.wait_for(said, timeout, f"the history of {session_id} says {outcome}", 0.3))


def replay_from_the_api(api: AppClient, session_id: str) -> dict[str, Any]:
    return dict(api.replay(session_id, idempotency_key=uuid.uuid4().hex))


class _Stay(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # the 303 comes back as it is


def replay_from_the_console(stack: PipelineStack, session_id: str, note: str = "fixed") -> None:
    """Sign in with the host key, open the session's page, press its Replay button; the
    console answers with a 303 to the session's page."""
    console = stack.console_url
    browser = urllib.request.build_opener(_Stay)

    def post(url: str, form: dict[str, str], cookie: str = "") -> urllib.error.HTTPError:
        request = urllib.request.Request(
            url, data=urllib.parse.urlencode(form).encode(), headers={"Cookie": cookie}
        )
        with pytest.raises(urllib.error.HTTPError) as answered:
            browser.open(request, timeout=30)
        assert answered.value.code == 303, answered.value.read()
        return answered.value

    signed_in = post(f"{console}/sign-in", {"key": stack.exports["KEY"]})
    cookie = signed_in.headers["Set-Cookie"].split(";")[0]
    page_url = f"{console}/sessions/{urllib.parse.quote(session_id, safe='')}"
    with browser.open(
        urllib.request.Request(page_url, headers={"Cookie": cookie}), timeout=30
    ) as r:
        page = r.read().decode()
    form = re.search(
        r'action="([^"]+/replay)".*?name="csrf_token" value="([^"]+)".*?'
        r'name="action_id" value="([^"]+)"',
        page,
        re.DOTALL,
    )
    assert form, page
    action = urllib.parse.urljoin(page_url, html.unescape(form.group(1)))
    fields = {"csrf_token": form.group(2), "action_id": form.group(3), "note": note}
    replayed = post(action, fields, cookie)
    assert urllib.parse.urljoin(action, replayed.headers["Location"]) == page_url
