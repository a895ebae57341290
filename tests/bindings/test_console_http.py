"""The console's own requests, called with real azure.functions objects: where signing in
sends the browser, and what a form the console cannot read is told."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlencode

import azure.functions as func
import pytest

from shared.bootstrap import Container, use_container
from shared.entrypoints.console.frame import console_sign_in, console_sign_out
from tests.builders import APP_SETTINGS, app_settings

HOST_KEY = "host-key"
BASE = "http://localhost:7071"


@pytest.fixture(autouse=True)
def app() -> Iterator[None]:
    use_container(Container(app_settings({**APP_SETTINGS, "FUNCTIONS_HOST_KEY": HOST_KEY})))
    yield
    use_container(None)


def post(path: str, form: dict[str, str], **headers: str) -> func.HttpRequest:
    return func.HttpRequest(
        method="POST",
        url=f"{BASE}{path}",
        headers={"Content-Type": "application/x-www-form-urlencoded", **headers},
        params={},
        body=urlencode(form).encode(),
    )


def sign_in(next_path: str) -> func.HttpResponse:
    return console_sign_in(post("/console/sign-in", {"key": HOST_KEY, "next": next_path}))


@pytest.mark.parametrize(
    "next_path",
    [
        "/console/sessions\r\nSet-Cookie: x=1",
        "/console/sessions\nX: 1",
        "/console/sess\tions",
        "/console/sess ions",
        "/console/s\x7f",
        "/console/é",
        "/consolexyz",
        "//evil.example/console",
        "/console/..\\evil",
        "https://evil.example/console",
    ],
    ids=["crlf", "lf", "tab", "space", "del", "non-ascii", "sibling", "scheme-less", "bs", "abs"],
)
def test_signing_in_with_a_next_that_is_not_a_console_path_goes_to_the_overview(
    next_path: str,
) -> None:
    response = sign_in(next_path)

    assert response.status_code == 303
    assert response.headers["Location"] == "/console"


@pytest.mark.parametrize(
    "next_path", ["/console", "/console/sessions?task=CalculateTotal", "/console/orders/j%2F1"]
)
def test_signing_in_goes_on_to_the_console_page_asked_for(next_path: str) -> None:
    response = sign_in(next_path)

    assert response.status_code == 303
    assert response.headers["Location"] == next_path


def test_a_console_form_over_the_limit_is_a_413_that_says_so() -> None:
    form = {"csrf": "whatever", "note": "x" * 300_000}

    response = console_sign_out(
        post("/console/sign-out", form, Cookie=f"console_key={HOST_KEY}", Origin=BASE)
    )

    assert response.status_code == 413
    page = response.get_body().decode()
    assert "too large" in page and "expired" not in page
    assert "at most 65536 bytes" in page


def test_a_sign_in_form_over_the_limit_is_a_413_too() -> None:
    response = console_sign_in(post("/console/sign-in", {"key": "k" * 300_000}))

    assert response.status_code == 413
