"""The dead-letter functions called as the worker calls them: real azure.functions requests,
timer and queue messages; the archive, the replay requests and the replay queue on a real
Azurite; the Service Bus side (dead-letter sub-queues, resender, seeder) as in-memory twins
here, and on the project's emulator in test_dead_letters_servicebus.py."""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
from typing import Any
from urllib.parse import quote

import azure.functions as func
import pytest
from azure.functions.queue import QueueMessage
from azure.functions.timer import TimerRequest

from shared.adapters.table_archive import TableDeadLetterArchive
from shared.domain.archive import FailureRecord, replay_session_id
from shared.domain.pipelines import PURCHASE_TASKS
from shared.entrypoints.archive_timer import archive_dead_letters
from shared.entrypoints.bulk_http import get_replay, request_replay
from shared.entrypoints.failed_sessions_http import (
    failed_session_groups,
    get_failed_session,
    list_failed_sessions,
    replay_failed_session,
)
from shared.entrypoints.replay_queue import replay_requests
from tests.builders import NOW, PIPELINES, purchase_dead_letter
from tests.outages import unreachable_blobs, unreachable_tables

from .conftest import StorageApp, host_route_value

pytestmark = pytest.mark.integration

BASE = "http://localhost:7071/api"
PURCHASE = PIPELINES.get("purchase").default_queue
IMPORTS = PIPELINES.get("product_import").default_queue


# -- given: dead letters, archived by the timer function ------------------------------------------


def failed_session(
    app: StorageApp,
    session: str,
    *,
    at_step: int = 3,
    reason: str = "PaymentProviderUnavailable",
    upto: int = len(PURCHASE_TASKS),
    queue: str = PURCHASE,
    context: dict[str, Any] | None = None,
) -> None:
    """A session that failed at ``at_step``: that message dead-lettered with ``reason`` and
    every later one with SessionFailed, up to ``upto`` (below 5: the last is not there yet)."""
    if context is not None:  # what the processor journals when it marks the session failed
        app.container.archive.record(
            session,
            FailureRecord(
                PURCHASE_TASKS[at_step - 1], at_step, reason, "why", NOW.isoformat(), context
            ),
        )
    app.dead_letters.add(purchase_dead_letter(session, at_step, reason, queue=queue))
    for step in range(at_step + 1, upto + 1):
        app.dead_letters.add(purchase_dead_letter(session, step, "SessionFailed", queue=queue))


def run_timer(*, past_due: bool = False) -> None:
    archive_dead_letters(TimerRequest(past_due=past_due))


# -- HTTP helpers ----------------------------------------------------------------------------


def _get(
    function: Any, path: str, *, params: dict[str, str] | None = None, **route: str
) -> func.HttpResponse:
    request = func.HttpRequest(
        method="GET", url=f"{BASE}/{path}", params=params or {}, route_params=route, body=b""
    )
    response: func.HttpResponse = function(request)
    return response


def _post(
    function: Any,
    path: str,
    *,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    params: dict[str, str] | None = None,
    **route: str,
) -> func.HttpResponse:
    sent_as = {"Content-Type": "application/json"} if body else {}
    request = func.HttpRequest(
        method="POST",
        url=f"{BASE}/{path}",
        headers={**sent_as, **(headers or {})},
        params=params or {},
        route_params=route,
        body=body,
    )
    response: func.HttpResponse = function(request)
    return response


def replay(session: str, key: str | None = "key-1", **params: str) -> func.HttpResponse:
    return _post(
        replay_failed_session,
        f"failed-sessions/{quote(session, safe='')}/replay",
        headers={"Idempotency-Key": key} if key is not None else {},
        params=params,
        session_id=host_route_value(session),
    )


def _json(response: func.HttpResponse) -> Any:
    assert response.mimetype == "application/json", response.get_body()
    return json.loads(response.get_body())


def assert_problem(response: func.HttpResponse, status: int) -> dict[str, Any]:
    assert response.status_code == status
    assert response.headers["Content-Type"] == "application/problem+json"
    document: dict[str, Any] = json.loads(response.get_body())
    assert document["status"] == status
    assert document["type"] == "about:blank"
    assert document["title"] and document["detail"]
    assert "Traceback" not in document["detail"]
    return document


# -- archive_dead_letters (timer) -------------------------------------------------------------


def test_the_timer_moves_dead_letters_into_the_table_and_says_what_it_moved(
    storage_app: StorageApp, caplog: pytest.LogCaptureFixture
) -> None:
    failed_session(storage_app, "order-1")  # 3 dead letters
    failed_session(storage_app, "import-1", at_step=5, reason="InvalidRow", queue=IMPORTS)

    with caplog.at_level(logging.INFO, logger="shared.entrypoints.archive_timer"):
        run_timer(past_due=True)

    assert storage_app.dead_letters.letters == {PURCHASE: [], IMPORTS: []}
    assert len(storage_app.dead_letters.completed) == 4
    rows = storage_app.container.archive.list_session("order-1")
    assert [(r.step, r.reason) for r in rows] == [
        (3, "PaymentProviderUnavailable"),
        (4, "SessionFailed"),
        (5, "SessionFailed"),
    ]
    moved = [r.getMessage() for r in caplog.records if "moved" in r.getMessage()]
    assert moved == [
        f"archive_dead_letters moved 4 dead letter(s) ({PURCHASE}=3, {IMPORTS}=1) "
        "in 2 transaction(s)"
    ]
    assert any("late" in r.getMessage() for r in caplog.records)


def test_one_timer_run_moves_at_most_the_configured_count(
    storage_app: StorageApp, caplog: pytest.LogCaptureFixture
) -> None:
    c = storage_app.container
    c.override(settings=dataclasses.replace(c.settings, archive_max_messages=2))
    failed_session(storage_app, "order-1", at_step=1)  # 5 dead letters

    with caplog.at_level(logging.INFO, logger="shared.entrypoints.archive_timer"):
        run_timer()

    assert len(storage_app.container.archive.list_session("order-1")) == 2
    assert len(storage_app.dead_letters.letters[PURCHASE]) == 3  # left for the next run
    assert "more are waiting for the next run" in caplog.text

    run_timer()
    run_timer()

    assert len(storage_app.container.archive.list_session("order-1")) == 5


# -- GET /api/failed-sessions ---------------------------------------------------------------------


@pytest.fixture
def incident(storage_app: StorageApp) -> StorageApp:
    """Three sessions failed at ProcessPayment (provider down), one declined, one import."""
    for n in range(3):
        failed_session(storage_app, f"order-{n}")
    failed_session(storage_app, "order-declined", reason="PaymentDeclined")
    failed_session(storage_app, "import-1", at_step=5, reason="InvalidRow", queue=IMPORTS)
    run_timer()
    return storage_app


def _list(**params: str) -> func.HttpResponse:
    return _get(list_failed_sessions, "failed-sessions", params=params)


def test_failed_sessions_say_which_task_failed_why_when_and_how_many_messages(
    incident: StorageApp,
) -> None:
    response = _list(reason="PaymentDeclined")

    assert response.status_code == 200
    [item] = _json(response)["items"]
    assert item["session_id"] == "order-declined"
    assert item["queue"] == PURCHASE
    assert (item["failed_task"], item["failed_step"]) == ("ProcessPayment", 3)
    assert item["reason"] == "PaymentDeclined"
    assert item["failed_at"] == NOW.isoformat()
    assert item["message_count"] == 3
    assert item["has_last"] is True
    assert item["status"] == "failed"
    assert item["replayed_session_id"] is None
    assert _json(response)["continuation"] is None


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, {"order-0", "order-1", "order-2", "order-declined", "import-1"}),
        ({"queue": IMPORTS}, {"import-1"}),
        ({"task": "ProcessPayment"}, {"order-0", "order-1", "order-2", "order-declined"}),
        (
            {"task": "ProcessPayment", "reason": "PaymentProviderUnavailable"},
            {f"order-{n}" for n in range(3)},
        ),
        ({"reason": "NoSuchReason"}, set()),
    ],
)
def test_failed_sessions_are_filtered_by_queue_task_and_reason(
    incident: StorageApp, params: dict[str, str], expected: set[str]
) -> None:
    items = _json(_list(**params))["items"]

    assert {item["session_id"] for item in items} == expected


def test_failed_sessions_are_paged_with_a_continuation_token(incident: StorageApp) -> None:
    seen: list[str] = []
    pages = 0
    params = {"page_size": "2"}
    while True:
        document = _json(_list(**params))
        pages += 1
        assert len(document["items"]) <= 2
        seen += [item["session_id"] for item in document["items"]]
        if not document["continuation"]:
            break
        params = {"page_size": "2", "continuation": document["continuation"]}

    assert pages == 3
    assert sorted(seen) == sorted({"order-0", "order-1", "order-2", "order-declined", "import-1"})


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"page_size": "0"}, "page_size"),
        ({"page_size": "201"}, "page_size"),
        ({"page_size": "ten"}, "page_size"),
        ({"status": "lost"}, "status"),
        ({"continuation": "not-a-token"}, "continuation"),
        ({"continuation": base64.urlsafe_b64encode(b"[1, 2]").decode()}, "continuation"),
    ],
)
def test_bad_list_parameters_are_400_problems_naming_the_parameter(
    incident: StorageApp, params: dict[str, str], field: str
) -> None:
    document = assert_problem(_list(**params), 400)

    assert document["errors"][0]["field"] == field


# -- GET /api/failed-session-groups ---------------------------------------------------------------


def test_failed_sessions_are_grouped_by_queue_task_and_reason_largest_first(
    incident: StorageApp,
) -> None:
    response = _get(failed_session_groups, "failed-session-groups")

    assert response.status_code == 200
    assert _json(response)["groups"] == [
        {
            "queue": PURCHASE,
            "failed_task": "ProcessPayment",
            "reason": "PaymentProviderUnavailable",
            "sessions": 3,
        },
        {
            "queue": IMPORTS,
            "failed_task": "SendReceiptEmail",
            "reason": "InvalidRow",
            "sessions": 1,
        },
        {
            "queue": PURCHASE,
            "failed_task": "ProcessPayment",
            "reason": "PaymentDeclined",
            "sessions": 1,
        },
    ]


def test_groups_of_one_queue_and_a_bad_status(incident: StorageApp) -> None:
    groups = _json(_get(failed_session_groups, "x", params={"queue": IMPORTS}))["groups"]
    assert [g["queue"] for g in groups] == [IMPORTS]

    document = assert_problem(_get(failed_session_groups, "x", params={"status": "x"}), 400)
    assert document["errors"][0]["field"] == "status"


# -- GET /api/failed-sessions/{session_id} --------------------------------------------------------


HOSTILE = "orders/2026#11?x\\y\x01%41" + "s" * 100


def test_a_failed_session_has_its_messages_in_send_order_even_with_a_hostile_id(
    storage_app: StorageApp,
) -> None:
    failed_session(storage_app, HOSTILE, at_step=2)
    run_timer()

    response = _get(
        get_failed_session,
        f"failed-sessions/{quote(HOSTILE, safe='')}",
        session_id=host_route_value(HOSTILE),
    )

    assert response.status_code == 200
    document = _json(response)
    assert document["session_id"] == HOSTILE
    assert [m["step"] for m in document["messages"]] == [2, 3, 4, 5]
    assert [m["task"] for m in document["messages"]] == list(PURCHASE_TASKS[1:])
    first = document["messages"][0]
    assert first["body_encoding"] == "json"
    assert first["body"]["payload"] == {"step": 2}
    assert first["reason"] == "PaymentProviderUnavailable"
    assert document["messages"][-1]["is_last"] is True


def test_an_unknown_session_is_a_404_problem(storage_app: StorageApp) -> None:
    response = _get(get_failed_session, "failed-sessions/nope", session_id="nope")

    assert "nope" in assert_problem(response, 404)["detail"]


# -- POST /api/failed-sessions/{session_id}/replay ------------------------------------------------


CONTEXT = {"order_number": "ORD-00000042", "total": "129.90"}


def test_a_replay_is_202_with_the_new_session_sent_in_order_and_seeded_with_the_context(
    storage_app: StorageApp,
) -> None:
    failed_session(storage_app, "order/7", context=CONTEXT)
    run_timer()

    response = replay("order/7", "key-1")

    assert response.status_code == 202
    document = _json(response)
    new_session = replay_session_id("order/7", "key-1")
    assert document == {
        "session_id": "order/7",
        "new_session_id": new_session,
        "queue": PURCHASE,
        "sent": 3,
        "status": "accepted",
        # The replayed work is the order's: its status follows the new session.
        "status_url": f"{BASE}/orders/job-order%2F7",
        "failed_session_url": f"{BASE}/failed-sessions/order%2F7",
    }
    assert response.headers["Location"] == document["status_url"]
    sent = storage_app.resender.sent
    assert {(queue, session) for queue, session, _ in sent} == {(PURCHASE, new_session)}
    assert [json.loads(m.body)["step"] for _, _, m in sent] == [3, 4, 5]
    state = json.loads(storage_app.seeder.states[(PURCHASE, new_session)])
    assert state["next_step"] == 3
    assert state["context"] == CONTEXT
    # The failed session now says it was replayed, and as which session.
    view = _json(_get(get_failed_session, "x", session_id="order%2F7"))
    assert (view["status"], view["replayed_session_id"]) == ("replayed", new_session)
    assert {m["status"] for m in view["messages"]} == {"replayed"}


def test_a_repeated_replay_with_the_same_key_sends_nothing_new(storage_app: StorageApp) -> None:
    failed_session(storage_app, "order-1")
    run_timer()
    first = _json(replay("order-1", "key-1"))

    again = replay("order-1", "key-1")

    assert again.status_code == 202
    assert _json(again)["new_session_id"] == first["new_session_id"]
    assert _json(again) == first  # the stored first response (Idempotency-Key)
    assert len(storage_app.resender.sent) == 3


def test_a_replay_under_another_key_after_one_succeeded_is_a_409(storage_app: StorageApp) -> None:
    failed_session(storage_app, "order-1")
    run_timer()
    first = _json(replay("order-1", "key-1"))

    document = assert_problem(replay("order-1", "key-2"), 409)

    assert first["new_session_id"] in document["detail"]
    assert len(storage_app.resender.sent) == 3


def test_the_same_key_with_another_force_is_a_422(storage_app: StorageApp) -> None:
    failed_session(storage_app, "order-1", upto=4)  # incomplete: force matters
    run_timer()
    assert replay("order-1", "key-1", force="true").status_code == 202

    document = assert_problem(replay("order-1", "key-1"), 422)

    assert "'key-1'" in document["detail"]
    assert len(storage_app.resender.sent) == 2


def test_replays_of_one_session_with_other_keys_are_409s_naming_the_winner(
    storage_app: StorageApp,
) -> None:
    failed_session(storage_app, "order-1")
    run_timer()
    won = _json(replay("order-1", "key-1"))

    for key in ("key-2", "key-3"):
        document = assert_problem(replay("order-1", key), 409)
        assert document["replay"]["new_session_id"] == won["new_session_id"]
        assert document["replay"]["idempotency_key"] == "key-1"

    assert len(storage_app.resender.sent) == 3
    view = _json(_get(get_failed_session, "x", session_id="order-1"))
    assert view["claim"]["key"] == "key-1"


def test_a_replay_of_an_incomplete_session_is_a_409_unless_forced(
    storage_app: StorageApp,
) -> None:
    failed_session(storage_app, "order-1", upto=4)  # the last message is not archived yet
    run_timer()

    document = assert_problem(replay("order-1"), 409)
    assert "force=true" in document["detail"]
    assert storage_app.resender.sent == []

    forced = replay("order-1", force="true")
    assert forced.status_code == 202
    assert _json(forced)["sent"] == 2


def test_a_replay_of_an_unknown_session_is_a_404(storage_app: StorageApp) -> None:
    assert "nope" in assert_problem(replay("nope"), 404)["detail"]


@pytest.mark.parametrize(
    ("key", "problem"),
    [(None, "is required"), ("", "must not be empty"), ("   ", "must not be empty")],
)
def test_a_replay_without_an_idempotency_key_is_a_400(
    storage_app: StorageApp, key: str | None, problem: str
) -> None:
    failed_session(storage_app, "order-1")
    run_timer()

    document = assert_problem(replay("order-1", key), 400)

    [error] = document["errors"]
    assert error["field"] == "Idempotency-Key" and error["problem"].startswith(problem)
    assert storage_app.resender.sent == []


def test_a_replay_with_a_force_that_is_not_a_flag_is_a_400(storage_app: StorageApp) -> None:
    document = assert_problem(replay("order-1", force="perhaps"), 400)

    assert document["errors"][0]["field"] == "force"


# -- POST /api/replays, replay_requests (queue trigger), GET /api/replays/{id} --------------------


def _request_replay(body: Any) -> func.HttpResponse:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return _post(request_replay, "replays", body=raw, headers={"Content-Type": "application/json"})


def _status(request_id: str) -> func.HttpResponse:
    return _get(get_replay, f"replays/{request_id}", request_id=request_id)


def _deliver(app: StorageApp, *, dequeue_count: int = 1) -> QueueMessage:
    """Take the next message off the real replay queue and build what the worker would: the
    host base64-decodes the text (its default message encoding) before the function sees it."""
    [message] = app.replay_queue.receive_messages(max_messages=1, visibility_timeout=1)
    return QueueMessage(
        id=message.id,
        body=base64.b64decode(message.content, validate=True),
        dequeue_count=dequeue_count,
        pop_receipt=message.pop_receipt,
    )


def test_a_bulk_replay_is_202_with_a_status_url_and_runs_from_the_storage_queue(
    incident: StorageApp,
) -> None:
    response = _request_replay({"task": "ProcessPayment", "reason": "PaymentProviderUnavailable"})

    assert response.status_code == 202
    document = _json(response)
    request_id = document["request_id"]
    assert document["status"] == "queued"
    assert document["status_url"] == f"{BASE}/replays/{request_id}"
    assert response.headers["Location"] == document["status_url"]
    queued = _json(_status(request_id))
    assert (queued["status"], queued["found"], queued["sent"]) == ("queued", 0, 0)
    assert incident.resender.sent == []  # nothing is replayed inside the HTTP request

    message = _deliver(incident)
    assert json.loads(message.get_body()) == {"request_id": request_id}
    replay_requests(message)

    progress = _json(_status(request_id))
    assert progress["status"] == "completed"
    assert (progress["found"], progress["sent"], progress["failed"]) == (3, 3, 0)
    assert progress["errors"] == [] and progress["failure"] is None
    replayed_sessions = {session for _, session, _ in incident.resender.sent}
    assert replayed_sessions == {
        replay_session_id(f"order-{n}", f"bulk:{request_id}") for n in range(3)
    }
    remaining = _json(_list(task="ProcessPayment"))["items"]
    assert [item["session_id"] for item in remaining] == ["order-declined"]


def test_a_bulk_replay_reports_sessions_it_could_not_send(storage_app: StorageApp) -> None:
    failed_session(storage_app, "order-1")
    failed_session(storage_app, "order-2", upto=4)  # incomplete
    run_timer()
    request_id = _json(_request_replay({"reason": "PaymentProviderUnavailable"}))["request_id"]

    replay_requests(_deliver(storage_app))

    progress = _json(_status(request_id))
    assert (progress["found"], progress["sent"], progress["failed"]) == (2, 1, 1)
    [error] = progress["errors"]
    assert error["session_id"] == "order-2"
    assert "last one" in error["error"]


class BrokenResender:
    def resend(self, queue_name: str, session_id: str, messages: Any) -> None:
        raise RuntimeError("Service Bus said no")


def test_a_bulk_replay_that_keeps_failing_is_marked_failed_when_it_goes_to_the_poison_queue(
    storage_app: StorageApp,
) -> None:
    failed_session(storage_app, "order-1")
    run_timer()
    storage_app.container.override(resender=BrokenResender())
    request_id = _json(_request_replay({"task": "ProcessPayment"}))["request_id"]
    body = _deliver(storage_app).get_body()

    for attempt in range(1, 5):  # host.json: maxDequeueCount 5
        with pytest.raises(RuntimeError, match="said no"):
            replay_requests(QueueMessage(id="m", body=body, dequeue_count=attempt))
        assert _json(_status(request_id))["status"] == "running"

    with pytest.raises(RuntimeError, match="said no"):  # the host moves it to the poison queue
        replay_requests(QueueMessage(id="m", body=body, dequeue_count=5))

    progress = _json(_status(request_id))
    assert progress["status"] == "failed"
    assert progress["failure"].startswith("Gave up after 5 attempts: RuntimeError")
    assert "poison queue" in progress["failure"]


def test_a_queue_message_that_is_not_a_replay_request_fails_to_the_poison_queue(
    storage_app: StorageApp,
) -> None:
    with pytest.raises(ValueError, match="not a replay request"):
        replay_requests(QueueMessage(id="m", body=b"hello", dequeue_count=1))


def test_a_queue_message_for_an_unknown_request_is_dropped(storage_app: StorageApp) -> None:
    replay_requests(QueueMessage(id="m", body=b'{"request_id": "gone"}', dequeue_count=1))

    assert storage_app.resender.sent == []


@pytest.mark.parametrize(
    ("body", "title", "field"),
    [
        (b"{not json", "The body is not JSON", None),
        (b"", "The body is not JSON", None),
        (b"\xff\xfe", "The body is not JSON", None),
        (["ProcessPayment"], "The body must be a JSON object", None),
        ({}, "The request is not valid", "task"),
        ({"queue": PURCHASE}, "The request is not valid", "task"),
        ({"task": ""}, "The request is not valid", "task"),
        ({"task": 3}, "The request is not valid", "task"),
        ({"tsk": "ProcessPayment"}, "The request is not valid", "tsk"),
    ],
)
def test_a_bad_bulk_replay_request_is_a_400_problem_and_queues_nothing(
    storage_app: StorageApp, body: Any, title: str, field: str | None
) -> None:
    document = assert_problem(_request_replay(body), 400)

    assert document["title"] == title
    if field:
        assert document["errors"][0]["field"] == field
    assert storage_app.replay_queue.peek_messages() == []


@pytest.mark.parametrize("request_id", ["nope#1?x", "0b8a4f1e-34c5-4f8e-bb1c-9c6c1d6f7e21"])
def test_an_unknown_replay_request_is_a_404(storage_app: StorageApp, request_id: str) -> None:
    assert request_id in assert_problem(_status(request_id), 404)["detail"]


# -- outages --------------------------------------------------------------------------------------


def test_storage_out_of_reach_is_a_503_problem_with_retry_after(storage_app: StorageApp) -> None:
    tables = unreachable_tables()
    storage_app.container.override(
        archive=TableDeadLetterArchive(
            tables.get_table_client("deadletters"),
            tables.get_table_client("failedsessions"),
            unreachable_blobs().get_container_client("bodies"),
        ),
    )

    for response in (
        _list(),
        _get(failed_session_groups, "failed-session-groups"),
        _get(get_failed_session, "failed-sessions/x", session_id="x"),
        replay("x"),
    ):
        document = assert_problem(response, 503)
        assert response.headers["Retry-After"] == "30"
        assert "Retry" in document["detail"]
