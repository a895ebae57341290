"""What an attacker found on the local stack, each now refused (each test failed before):

- the ``Host`` header was echoed into ``Location`` and ``status_url``: the API builds them from
  ``PUBLIC_BASE_URL``, or answers with the path alone;
- a JSON body sent as ``text/plain``, form-encoded or with no content type started real jobs:
  a JSON route refuses it with 415 naming ``application/json``, before anything is sent;
- a replay by filter (``POST /api/replays``) was audited under its request id: each session it
  replays is audited under its caller (the key's digest) and role.

The functions are called as the worker calls them: the worker's ``url`` is built from the
request's ``Host`` header, so a request to ``http://evil.example/...`` is what a client that
sent ``Host: evil.example`` makes the app see."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import azure.functions as func
import pytest

from shared.domain.audit import key_holder
from shared.domain.roles import Role, key_digest
from shared.entrypoints.bulk_http import request_replay
from shared.entrypoints.failed_sessions_http import (
    edit_and_replay_session,
    failed_session_history,
    replay_failed_session,
    resolve_failed_session,
)
from shared.entrypoints.orders_http import submit_order_http
from shared.entrypoints.replay_queue import replay_requests
from tests.builders import order_document

from .conftest import StorageApp, Twins
from .test_dead_letters import _deliver, failed_session, run_timer

EVIL = "http://evil.example"
ORDER = json.dumps(order_document()).encode()


def _request(
    function: Any,
    path: str,
    *,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    route: dict[str, str] | None = None,
    method: str = "POST",
) -> func.HttpResponse:
    response: func.HttpResponse = function(
        func.HttpRequest(
            method=method,
            url=f"{EVIL}/api/{path}",
            headers=headers or {},
            params={},
            route_params=route or {},
            body=body,
        )
    )
    return response


@pytest.fixture
def no_public_base(twins: Twins) -> Iterator[Twins]:
    settings = twins.container.settings
    twins.container.override(settings=dataclasses.replace(settings, public_base_url=None))
    yield twins


# -- the Host header -------------------------------------------------------------------------


def test_an_order_s_location_and_status_url_are_the_configured_base_never_the_host(
    twins: Twins,
) -> None:
    response = _request(
        submit_order_http, "orders", body=ORDER, headers={"Content-Type": "application/json"}
    )

    assert response.status_code == 202
    document = json.loads(response.get_body())
    expected = f"http://localhost:7071/api/orders/{document['job_id']}"
    assert response.headers["Location"] == document["status_url"] == expected


def test_without_a_configured_base_the_urls_are_paths_alone(no_public_base: Twins) -> None:
    response = _request(
        submit_order_http, "orders", body=ORDER, headers={"Content-Type": "application/json"}
    )

    assert response.status_code == 202
    document = json.loads(response.get_body())
    assert response.headers["Location"] == f"/api/orders/{document['job_id']}"
    assert document["status_url"] == response.headers["Location"]
    assert "evil" not in response.get_body().decode()


@pytest.mark.integration
def test_a_replay_s_urls_are_the_configured_base_never_the_host(storage_app: StorageApp) -> None:
    failed_session(storage_app, "order-1")
    run_timer()

    response = _request(
        replay_failed_session,
        "failed-sessions/order-1/replay",
        headers={"Idempotency-Key": "k-1"},
        route={"session_id": "order-1"},
    )
    bulk = _request(
        request_replay,
        "replays",
        body=b'{"task": "ProcessPayment"}',
        headers={"Content-Type": "application/json"},
    )

    assert response.status_code == 202 and bulk.status_code == 202
    for answer in (response, bulk):
        text = answer.get_body().decode() + answer.headers["Location"]
        assert "evil.example" not in text
        assert answer.headers["Location"].startswith("http://localhost:7071/api/")


# -- 415 for a body that is not JSON ---------------------------------------------------------

NOT_JSON = [
    pytest.param({"Content-Type": "text/plain"}, id="text-plain"),
    pytest.param({"Content-Type": "application/x-www-form-urlencoded"}, id="form"),
    pytest.param({}, id="no-content-type"),
]


@pytest.mark.parametrize("headers", NOT_JSON)
def test_an_order_that_is_not_sent_as_json_is_a_415_and_starts_nothing(
    twins: Twins, headers: dict[str, str]
) -> None:
    response = _request(submit_order_http, "orders", body=ORDER, headers=headers)

    assert response.status_code == 415
    problem = json.loads(response.get_body())
    assert problem["errors"] == [
        {"field": "Content-Type", "problem": problem["errors"][0]["problem"]}
    ]
    assert "application/json" in problem["detail"]
    assert twins.sender.sessions == []


def test_json_with_a_charset_is_json(twins: Twins) -> None:
    response = _request(
        submit_order_http,
        "orders",
        body=ORDER,
        headers={"Content-Type": "Application/JSON; charset=utf-8"},
    )

    assert response.status_code == 202


@pytest.mark.integration
@pytest.mark.parametrize("headers", NOT_JSON)
def test_the_operator_routes_refuse_a_body_that_is_not_json_before_acting(
    storage_app: StorageApp, headers: dict[str, str]
) -> None:
    failed_session(storage_app, "order-1")
    run_timer()
    key = {"Idempotency-Key": "k-1", **headers}
    route = {"session_id": "order-1"}

    answers = [
        _request(request_replay, "replays", body=b'{"task": "ProcessPayment"}', headers=headers),
        _request(
            resolve_failed_session,
            "failed-sessions/order-1/resolve",
            body=b'{"note": "dup"}',
            headers=key,
            route=route,
        ),
        _request(
            edit_and_replay_session,
            "failed-sessions/order-1/edit-and-replay",
            body=b'{"note": "x", "messages": {"1": {}}}',
            headers=key,
            route=route,
        ),
    ]

    assert [a.status_code for a in answers] == [415, 415, 415]
    assert storage_app.replay_queue.peek_messages() == []
    assert storage_app.resender.sent == []
    assert storage_app.container.archive.get_summary("order-1").status == "failed"


# -- POST /api/replays audits its caller -----------------------------------------------------

OPS_KEY = "an-operators-key"


@pytest.mark.integration
def test_a_replay_by_filter_is_audited_under_its_caller_and_role(storage_app: StorageApp) -> None:
    access = storage_app.container.settings.console
    operator = dataclasses.replace(access, key_roles={key_digest(OPS_KEY): Role.EDITOR})
    storage_app.container.override(
        settings=dataclasses.replace(storage_app.container.settings, console=operator)
    )
    failed_session(storage_app, "order-1")
    run_timer()

    accepted = _request(
        request_replay,
        "replays",
        body=b'{"reason": "PaymentProviderUnavailable"}',
        headers={"Content-Type": "application/json", "x-functions-key": OPS_KEY},
    )
    assert accepted.status_code == 202
    replay_requests(_deliver(storage_app))

    history = _request(
        failed_session_history,
        "failed-sessions/order-1/history",
        route={"session_id": "order-1"},
        method="GET",
    )
    [entry] = json.loads(history.get_body())["entries"]
    assert entry["action"] == "bulk-replay"
    assert entry["who"] == key_holder(OPS_KEY)
    assert entry["role"] == "Editor"
