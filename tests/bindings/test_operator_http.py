"""The operator's API called as the worker calls it (real azure.functions requests), the archive,
audit trail, confirmation tokens, replay requests and Idempotency-Keys on a real Azurite:
root causes, a session's history, edit and replay, resolve, bulk actions through a preview and
a token, the overview, an order found by its number. Each refusal is an RFC 9457 document
naming the field, before anything is done."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import azure.functions as func
import pytest

from shared.domain.archive import replay_session_id
from shared.domain.envelope import TaskMessage
from shared.entrypoints.bulk_http import confirm_bulk, preview_bulk
from shared.entrypoints.failed_sessions_http import (
    edit_and_replay_session,
    failed_session_fingerprint,
    failed_session_fingerprints,
    failed_session_history,
    get_failed_session,
    list_failed_sessions,
    replay_failed_session,
    resolve_failed_session,
)
from shared.entrypoints.orders_http import get_order_by_number
from shared.entrypoints.overview_http import get_overview
from tests.builders import dead_letter, order_document

from .conftest import StorageApp, host_route_value
from .test_dead_letters import (
    _get,
    _json,
    _post,
    assert_problem,
    failed_session,
    replay,
    run_timer,
)

pytestmark = pytest.mark.integration

KEY = {"x-functions-key": "the-host-key"}


def _body(document: Any) -> bytes:
    return json.dumps(document).encode()


def _session_route(session: str, tail: str) -> tuple[str, str]:
    """The path of a session's action and the session_id route value the host hands the binding."""
    return f"failed-sessions/{quote(session, safe='')}/{tail}", host_route_value(session)


def resolve(session: str, note: object, key: str | None = "r-1") -> func.HttpResponse:
    path, session_id = _session_route(session, "resolve")
    headers = {**KEY, **({"Idempotency-Key": key} if key else {})}
    return _post(
        resolve_failed_session,
        path,
        body=_body({"note": note}),
        headers=headers,
        session_id=session_id,
    )


def history(session: str) -> dict[str, Any]:
    path, session_id = _session_route(session, "history")
    response = _get(failed_session_history, path, session_id=session_id)
    assert response.status_code == 200
    document: dict[str, Any] = _json(response)
    return document


@pytest.fixture
def three_failed(storage_app: StorageApp) -> StorageApp:
    failed_session(storage_app, "order/1")
    failed_session(storage_app, "order-2")
    failed_session(storage_app, "order-3", at_step=2, reason="UnknownSku")
    run_timer()
    return storage_app


def test_root_causes_and_their_sessions(three_failed: StorageApp) -> None:
    response = _get(failed_session_fingerprints, "failed-session-fingerprints")
    causes = _json(response)["fingerprints"]
    assert [(c["reason"], c["sessions"]) for c in causes] == [
        ("PaymentProviderUnavailable", 2),
        ("UnknownSku", 1),
    ]
    wanted = causes[0]["fingerprint"]
    response = _get(
        failed_session_fingerprint, f"failed-session-fingerprints/{wanted}", fingerprint=wanted
    )
    assert sorted(s["session_id"] for s in _json(response)["items"]) == ["order-2", "order/1"]
    assert_problem(_get(failed_session_fingerprints, "x", params={"status": "lost"}), 400)


def test_resolve_needs_a_key_and_a_note_then_takes_the_session_out_of_the_failed_list(
    three_failed: StorageApp,
) -> None:
    assert assert_problem(resolve("order/1", "dup", key=None), 400)["errors"][0]["field"] == (
        "Idempotency-Key"
    )
    assert assert_problem(resolve("order/1", ""), 400)["errors"][0]["field"] == "note"
    assert assert_problem(resolve("order/1", 7), 400)["errors"][0]["field"] == "note"
    assert history("order/1")["status"] == "failed"

    done = resolve("order/1", "duplicate of order-2")
    assert done.status_code == 200
    assert _json(done)["status"] == "resolved"
    assert _json(resolve("order/1", "duplicate of order-2")) == _json(done)  # the same key
    assert assert_problem(resolve("order/1", "dup", key="r-2"), 409)["resolution"]
    assert assert_problem(replay("order/1", "k-9"), 409)["title"] == "The session was resolved"

    seen = history("order/1")
    assert seen["status"] == "resolved" and seen["resolved"]["idempotency_key"] == "r-1"
    listed = _get(list_failed_sessions, "failed-sessions", params={"status": "resolved"})
    assert [s["session_id"] for s in _json(listed)["items"]] == ["order/1"]
    listed = _get(list_failed_sessions, "failed-sessions")
    assert "order/1" not in [s["session_id"] for s in _json(listed)["items"]]
    (entry,) = seen["entries"]
    assert (entry["action"], entry["note"]) == ("resolve", "duplicate of order-2")
    assert entry["who"].startswith("function key ") and "the-host-key" not in entry["who"]


def test_a_plain_replay_is_audited_as_the_consoles_is(three_failed: StorageApp) -> None:
    path, session_id = _session_route("order/1", "replay")

    def send() -> func.HttpResponse:
        headers = {**KEY, "Idempotency-Key": "p-1"}
        return _post(replay_failed_session, path, headers=headers, session_id=session_id)

    first = send()
    assert first.status_code == 202
    assert _json(send()) == _json(first)  # the same key: one replay, one audit entry

    (entry,) = history("order/1")["entries"]
    assert (entry["action"], entry["note"]) == ("replay", "")
    assert entry["who"].startswith("function key ") and "the-host-key" not in entry["who"]
    assert entry["new_session_id"] == replay_session_id("order/1", "p-1")


def test_edit_and_replay_checks_the_edit_before_sending_and_audits_the_diff(
    storage_app: StorageApp,
) -> None:
    session = "order-9"
    message = TaskMessage(
        job_id="job-9",
        pipeline="purchase",
        task="CalculateTotal",
        step=2,
        is_last=True,
        payload=order_document(currency="EURO"),
    )
    storage_app.dead_letters.add(
        dead_letter(
            message,
            "InvalidOrder",
            queue="purchase-tasks",
            session_id=session,
            description="currency: EURO is no currency",
            enqueued_time=None,
            sequence_number=1,
        )
    )
    run_timer()
    # The row key and the body as GET /api/failed-sessions/{session_id} shows them.
    shown = _json(_get(get_failed_session, f"failed-sessions/{session}", session_id=session))
    row_key, first = shown["messages"][0]["row_key"], shown["messages"][0]["body"]
    path, session_id = _session_route(session, "edit-and-replay")

    def send(messages: dict[str, Any], note: str = "fix") -> func.HttpResponse:
        return _post(
            edit_and_replay_session,
            path,
            body=_body({"note": note, "messages": messages}),
            headers={**KEY, "Idempotency-Key": "e-1"},
            session_id=session_id,
        )

    moved = {**first, "step": 9}
    problem = assert_problem(send({row_key: moved}), 400)
    assert problem["errors"][0]["field"] == f"messages[{row_key}].body.step"
    still_wrong = {**first, "payload": {**first["payload"], "currency": "EUROS"}}
    problem = assert_problem(send({row_key: still_wrong}), 400)
    assert problem["errors"][0]["field"].endswith(".body.payload.currency")
    assert storage_app.resender.sent == []

    fixed = {**first, "payload": {**first["payload"], "currency": "EUR"}}
    response = send({row_key: fixed})

    assert response.status_code == 202
    assert _json(response)["new_session_id"] == replay_session_id(session, "e-1")
    sent = [json.loads(m.body) for _, _, m in storage_app.resender.sent]
    assert sent[0]["payload"]["currency"] == "EUR"
    assert json.loads(storage_app.container.archive.list_session(session)[0].body) == first
    (entry,) = history(session)["entries"]
    assert entry["action"] == "edit-and-replay"
    assert entry["edits"][0]["changes"] == [
        {"op": "replace", "path": "/payload/currency", "old": "EURO", "new": "EUR"}
    ]
    assert history(session)["replays"][0]["outcome"] == "in progress"


def test_a_bulk_action_needs_a_preview_and_its_token_once(three_failed: StorageApp) -> None:
    preview = _post(
        preview_bulk,
        "bulk-previews",
        body=_body({"action": "resolve", "reason": "PaymentProviderUnavailable"}),
        headers=KEY,
    )
    assert preview.status_code == 201
    previewed = _json(preview)
    assert previewed["sessions"] == 2 and previewed["groups"][0]["sessions"] == 2

    def confirm(action: str, note: str = "refunded") -> func.HttpResponse:
        body = {"action": action, "token": previewed["token"], "note": note}
        return _post(confirm_bulk, "bulk-actions", body=_body(body), headers=KEY)

    assert assert_problem(confirm("resolve", note=""), 400)["errors"][0]["field"] == "note"
    started = confirm("resolve")
    assert started.status_code == 202
    assert started.headers["Location"].endswith(f"/api/replays/{_json(started)['request_id']}")
    assert _json(started)["action"] == "resolve"
    assert assert_problem(confirm("resolve"), 409)  # used
    nothing = _post(
        preview_bulk, "bulk-previews", body=_body({"action": "replay", "task": "Nope"}), headers=KEY
    )
    assert assert_problem(nothing, 400)["errors"][0]["field"] == "reason"
    unknown = _post(preview_bulk, "bulk-previews", body=_body({"action": "delete"}), headers=KEY)
    assert assert_problem(unknown, 400)["errors"][0]["field"] == "action"


def test_the_overview_and_an_unknown_order_number(three_failed: StorageApp) -> None:
    overview = _json(_get(get_overview, "overview"))
    assert overview["failed_sessions"] == 3
    assert overview["orders"] == {"in_flight": 0, "completed": 0, "failed": 0, "counted": 0}
    missing = _get(get_order_by_number, "order-numbers/ORD-1", order_number="ORD-1")
    assert assert_problem(missing, 404)["title"] == "Unknown order"
