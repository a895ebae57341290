"""Hostile input refused before any side effect, and the Idempotency-Key rules, called with
real azure.functions requests: every refusal is a problem document naming the field and the
limit, and nothing is enqueued, replayed or queued."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import azure.functions as func
import pytest

from shared.domain.idempotency import IdempotencyRecord, fingerprint
from shared.domain.orders import parse_order
from shared.entrypoints.bulk_http import request_replay
from shared.entrypoints.failed_sessions_http import (
    list_failed_sessions,
    replay_failed_session,
)
from shared.entrypoints.orders_http import get_order, submit_order_http
from tests.builders import order_document
from tests.fakes import (
    InMemoryDeadLetterArchive,
    InMemoryOrderNumbers,
    InMemoryPaymentGateway,
    InMemoryReceiptEmails,
    InMemorySessionOutcomes,
)

from .conftest import StorageApp, Twins

BASE = "http://localhost:7071/api"
ORDER = order_document()


def request(
    method: str,
    path: str,
    *,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    params: dict[str, str] | None = None,
    route: dict[str, str] | None = None,
) -> func.HttpRequest:
    sent_as = {"Content-Type": "application/json"} if body else {}
    return func.HttpRequest(
        method=method,
        url=f"{BASE}/{path}",
        headers={**sent_as, **(headers or {})},
        params=params or {},
        route_params=route or {},
        body=body,
    )


def order_request(body: bytes, **headers: str) -> func.HttpRequest:
    return request(
        "POST", "orders", body=body, headers={"Content-Type": "application/json", **headers}
    )


def problem_of(response: func.HttpResponse, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.get_body()
    assert response.headers["Content-Type"] == "application/problem+json"
    document: dict[str, Any] = json.loads(response.get_body())
    assert document["status"] == status and document["title"] and document["detail"]
    return document


def field_and_problem(document: dict[str, Any]) -> tuple[str, str]:
    [error] = document["errors"]
    return error["field"], error["problem"]


@pytest.fixture
def shop(twins: Twins) -> Iterator[Twins]:
    """The twins, with the stores GET /api/orders/{job_id} reads in memory too."""
    twins.container.override(
        order_numbers=InMemoryOrderNumbers(),
        payments=InMemoryPaymentGateway(),
        archive=InMemoryDeadLetterArchive(),
        receipt_emails=InMemoryReceiptEmails(),
        session_outcomes=InMemorySessionOutcomes(),
    )
    yield twins


# -- POST /api/orders: hostile bodies ------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field", "limit"),
    [
        pytest.param(
            json.dumps({**ORDER, "customer_name": "\ud800"}).encode(),
            "customer_name",
            "lone surrogate",
            id="lone-surrogate",
        ),
        pytest.param(b"[" * 20_000 + b"]" * 20_000, "body", "at most 16", id="nested-20000"),
        pytest.param(
            json.dumps({**ORDER, "currency": "XXX"}).encode(),
            "currency",
            "ISO 4217 in circulation",
            id="currency-XXX",
        ),
        pytest.param(
            json.dumps({**ORDER, "customer_email": '"a\\"b"@example.com'}).encode(),
            "customer_email",
            "a quote",
            id="quoted-local-part",
        ),
        pytest.param(
            json.dumps({**ORDER, "customer_name": "Ada \u202eecilA"}).encode(),
            "customer_name",
            "bidi control U+202E",
            id="right-to-left-override",
        ),
        pytest.param(
            b'{"customer_name": "Ada", "customer_name": "Eve"}',
            "customer_name",
            "appears twice",
            id="duplicate-key",
        ),
        pytest.param(
            json.dumps(ORDER).replace('"quantity": 2', '"quantity": ' + "7" * 5000).encode(),
            "lines[0].quantity",
            "at most 18",
            id="quantity-5000-digits",
        ),
    ],
)
def test_a_hostile_order_is_a_400_naming_the_field_and_nothing_is_sent(
    shop: Twins, body: bytes, field: str, limit: str
) -> None:
    document = problem_of(submit_order_http(order_request(body, **{"Idempotency-Key": "k"})), 400)

    assert field_and_problem(document)[0] == field
    assert limit in field_and_problem(document)[1]
    assert shop.sender.sessions == [] and shop.orders.accepted == {}
    assert shop.idempotency.records == {}  # the key is free for a corrected order


def test_a_body_declared_over_the_limit_is_a_413_before_it_is_read(shop: Twins) -> None:
    # The declared length decides: the (empty) body is never looked at.
    response = submit_order_http(order_request(b"", **{"Content-Length": str(20 * 1024 * 1024)}))

    field, problem = field_and_problem(problem_of(response, 413))
    assert (field, problem) == ("body", "is 20971520 bytes; send at most 262144 bytes")
    assert shop.sender.sessions == []


@pytest.mark.parametrize("declared", ["-1", "ten", "1" * 40])
def test_a_content_length_that_is_not_a_length_is_a_400(shop: Twins, declared: str) -> None:
    response = submit_order_http(order_request(b"{}", **{"Content-Length": declared}))

    assert field_and_problem(problem_of(response, 400)) == (
        "Content-Length",
        "must be a whole number of bytes",
    )


def test_an_idempotency_key_over_255_characters_is_a_400(shop: Twins) -> None:
    response = submit_order_http(
        order_request(json.dumps(ORDER).encode(), **{"Idempotency-Key": "k" * 256})
    )

    assert field_and_problem(problem_of(response, 400)) == (
        "Idempotency-Key",
        "must be at most 255 characters",
    )
    assert shop.sender.sessions == []


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("", "must not be empty"),
        ("   ", "must not be empty"),
        ("order-1,order-2", "must hold one key"),  # two headers, as the host joins them
    ],
    ids=["empty", "blank", "two-headers"],
)
def test_an_idempotency_key_sent_empty_blank_or_twice_is_a_400_and_no_order_is_sent(
    shop: Twins, key: str, problem: str
) -> None:
    response = submit_order_http(
        order_request(json.dumps(ORDER).encode(), **{"Idempotency-Key": key})
    )

    field, said = field_and_problem(problem_of(response, 400))
    assert field == "Idempotency-Key" and problem in said
    assert shop.sender.sessions == [] and shop.orders.accepted == {}


# -- POST /api/orders: Idempotency-Key ----------------------------------------------------------


def test_the_same_key_with_another_order_is_a_422_and_the_second_order_is_not_sent(
    shop: Twins,
) -> None:
    first = submit_order_http(order_request(json.dumps(ORDER).encode(), **{"Idempotency-Key": "k"}))
    other = {**ORDER, "lines": [{"sku": "SKU-2", "quantity": 1}]}

    second = submit_order_http(
        order_request(json.dumps(other).encode(), **{"Idempotency-Key": "k"})
    )

    assert first.status_code == 202
    document = problem_of(second, 422)
    assert "'k'" in document["detail"] and "new key" in document["detail"]
    assert len(shop.sender.sessions) == 1
    [(_, _, messages)] = shop.sender.sessions
    assert messages[0].payload["lines"] == ORDER["lines"]


def test_a_repeat_while_the_first_is_in_flight_is_a_409_with_retry_after(shop: Twins) -> None:
    started = datetime.now(UTC).isoformat()
    shop.idempotency.start(
        "orders", "k", IdempotencyRecord(fingerprint(parse_order(ORDER).to_payload()), started)
    )

    response = submit_order_http(
        order_request(json.dumps(ORDER).encode(), **{"Idempotency-Key": "k"})
    )

    assert "still being processed" in problem_of(response, 409)["detail"]
    assert response.headers["Retry-After"] == "5"
    assert shop.sender.sessions == []


def test_the_same_order_in_another_json_spelling_is_the_same_request(shop: Twins) -> None:
    first = submit_order_http(order_request(json.dumps(ORDER).encode(), **{"Idempotency-Key": "k"}))
    spelled = json.dumps(dict(reversed(list(ORDER.items()))), indent=4).encode()

    again = submit_order_http(order_request(spelled, **{"Idempotency-Key": "k"}))

    assert again.status_code == 202 and again.get_body() == first.get_body()
    assert len(shop.sender.sessions) == 1


# -- GET /api/orders/{job_id}: where the Location of an order points ----------------------------


def test_the_location_of_an_accepted_order_is_its_status(shop: Twins) -> None:
    accepted = submit_order_http(order_request(json.dumps(ORDER).encode()))
    location = accepted.headers["Location"]
    job_id = json.loads(accepted.get_body())["job_id"]
    assert location == f"{BASE}/orders/{job_id}"

    status = get_order(request("GET", f"orders/{job_id}", route={"job_id": job_id}))

    assert status.status_code == 200
    document = json.loads(status.get_body())
    assert (document["job_id"], document["status"], document["next_task"]) == (
        job_id,
        "accepted",
        "GenerateOrderNumber",
    )


def test_an_unknown_order_is_a_404_problem(shop: Twins) -> None:
    response = get_order(request("GET", "orders/nope", route={"job_id": "nope"}))

    assert "'nope'" in problem_of(response, 404)["detail"]


# -- the failed-sessions and replay routes ------------------------------------------------------


@pytest.mark.integration
def test_a_page_size_of_4301_digits_is_a_400_naming_page_size(storage_app: StorageApp) -> None:
    response = list_failed_sessions(
        request("GET", "failed-sessions", params={"page_size": "9" * 4301})
    )

    assert field_and_problem(problem_of(response, 400)) == (
        "page_size",
        "must be a whole number from 1 to 200",
    )


@pytest.mark.integration
def test_a_filter_over_1024_characters_is_a_400(storage_app: StorageApp) -> None:
    response = list_failed_sessions(request("GET", "failed-sessions", params={"task": "T" * 1025}))

    assert field_and_problem(problem_of(response, 400)) == (
        "task",
        "must be at most 1024 characters, got 1025",
    )


@pytest.mark.integration
def test_a_session_id_over_256_characters_is_a_400(storage_app: StorageApp) -> None:
    session = "s" * 257
    response = replay_failed_session(
        request(
            "POST",
            f"failed-sessions/{session}/replay",
            headers={"Idempotency-Key": "k"},
            route={"session_id": session},
        )
    )

    assert field_and_problem(problem_of(response, 400))[0] == "session_id"
    assert storage_app.resender.sent == []


@pytest.mark.integration
def test_a_20_mib_replay_body_is_a_413_before_it_is_read(storage_app: StorageApp) -> None:
    response = replay_failed_session(
        request(
            "POST",
            "failed-sessions/s/replay",
            headers={"Idempotency-Key": "k", "Content-Length": str(20 * 1024 * 1024)},
            route={"session_id": "s"},
        )
    )

    assert field_and_problem(problem_of(response, 413)) == (
        "body",
        "is 20971520 bytes; send at most 4096 bytes",
    )
    assert storage_app.resender.sent == []


@pytest.mark.integration
@pytest.mark.parametrize(
    ("document", "status", "field", "problem"),
    [
        pytest.param(
            {"task": "T" * 32_000}, 413, "body", "send at most 4096 bytes", id="task-32000"
        ),
        pytest.param(
            {"reason": "R" * 2_000}, 400, "reason", "at most 1024 characters", id="reason-2000"
        ),
        pytest.param({"task": "\ud800"}, 400, "task", "lone surrogate", id="lone-surrogate"),
    ],
)
def test_a_hostile_bulk_replay_is_refused_and_queues_nothing(
    storage_app: StorageApp, document: dict[str, str], status: int, field: str, problem: str
) -> None:
    response = request_replay(request("POST", "replays", body=json.dumps(document).encode()))

    found_field, found_problem = field_and_problem(problem_of(response, status))
    assert found_field == field and problem in found_problem
    assert "Retry-After" not in response.headers
    assert storage_app.replay_queue.peek_messages() == []


@pytest.mark.integration
def test_a_bulk_replay_without_task_reason_or_window_says_so_in_a_sentence(
    storage_app: StorageApp,
) -> None:
    response = request_replay(request("POST", "replays", body=b'{"queue": "purchase-tasks"}'))

    document = problem_of(response, 400)
    assert document["detail"].startswith("task or reason (or a window: failed_from, failed_to) ")
    assert field_and_problem(document)[0] == "task"
    assert storage_app.replay_queue.peek_messages() == []
