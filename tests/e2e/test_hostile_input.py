"""Hostile input through the local host: each request is refused with a problem document
naming the field and the limit, before anything is sent, charged or mailed. An order refused
under an Idempotency-Key leaves the key free: the corrected order sent with it afterwards is
the one order of that key, charged and mailed once."""

from __future__ import annotations

import json
import uuid
from decimal import Decimal
from typing import Any

import pytest
from azure.data.tables import TableClient

from localdev.api_client import ApiResponse
from shared.adapters.azure_clients import REPLAY_REQUESTS_TABLE

from .conftest import E2E, charged_total, order, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("catalogue")]

# 1 x 10.00 + 25% tax + 4.95 shipping
ONE_TEA = Decimal("17.45")


def post_order(e2e: E2E, body: bytes, key: str, **headers: str) -> ApiResponse:
    return e2e.api.request(
        "POST",
        "orders",
        body=body,
        headers={"Content-Type": "application/json", "Idempotency-Key": key, **headers},
    )


def problem(response: ApiResponse, status: int) -> dict[str, Any]:
    assert response.status == status, response.body[:300]
    assert response.headers["Content-Type"].startswith("application/problem+json")
    document = dict(response.json())
    assert document["status"] == status and document["title"] and document["detail"]
    assert "Retry-After" not in response.headers
    return document


def the_one_order_of(e2e: E2E, key: str) -> None:
    """The key is still free: a good order with it is accepted, followed to completion, and
    charged and mailed once, for its own total."""
    accepted = post_order(e2e, json.dumps(order("tok_visa_4242", ("E2E-TEA", 1))).encode(), key)
    assert accepted.status == 202, accepted.body
    job = accepted.json()["job_id"]
    location = accepted.headers["Location"]
    assert location == f"{e2e.api.api_url}/orders/{job}"
    mail = wait_for(lambda: e2e.receipt_mail(job), timeout=60, what=f"the receipt of {job}")
    assert charged_total(mail) == ONE_TEA
    assert len(e2e.receipt_mails(job)) == 1
    assert [c.amount for c in e2e.charges_for(job)] == [ONE_TEA]
    # the mail goes out inside the last task; the order reads completed once it is recorded
    status = wait_for(
        lambda: (
            (found := e2e.api.request("GET", location.removeprefix(e2e.api.api_url + "/")).json())
            and found["status"] == "completed"
            and found
        ),
        timeout=30,
        what=f"order {job} completed",
    )
    assert Decimal(status["total"]) == ONE_TEA


GOOD = order("tok_visa_4242", ("E2E-TEA", 1))


@pytest.mark.parametrize(
    ("body", "status", "field", "limit"),
    [
        pytest.param(
            json.dumps({**GOOD, "customer_name": "\ud800"}).encode(),
            400,
            "customer_name",
            "lone surrogate",
            id="lone-surrogate-in-customer_name",
        ),
        pytest.param(
            b"[" * 20_000 + b"]" * 20_000, 400, "body", "at most 16", id="nested-20000-deep"
        ),
        pytest.param(
            json.dumps(GOOD)
            .replace('"customer_name"', '"customer_name": "Eve", "customer_name"')
            .encode(),
            400,
            "customer_name",
            "appears twice",
            id="duplicate-key",
        ),
        pytest.param(
            json.dumps(GOOD).replace('"quantity": 1', '"quantity": ' + "1" * 5_000).encode(),
            400,
            "lines[0].quantity",
            "5000 characters; at most 18",
            id="quantity-of-5000-digits",
        ),
        pytest.param(b" " * (20 * 1024 * 1024), 413, "body", "at most 262144 bytes", id="20-mib"),
    ],
)
def test_a_hostile_order_is_refused_and_nothing_is_sent_or_charged(
    e2e: E2E, body: bytes, status: int, field: str, limit: str
) -> None:
    key = f"hostile-{uuid.uuid4()}"

    document = problem(post_order(e2e, body, key), status)

    [error] = document["errors"]
    assert error["field"] == field and limit in error["problem"], error
    the_one_order_of(e2e, key)


def test_the_same_key_with_another_order_is_a_422_and_only_the_first_is_charged(
    e2e: E2E,
) -> None:
    key = f"reused-{uuid.uuid4()}"
    first = post_order(e2e, json.dumps(GOOD).encode(), key)
    bigger = order("tok_visa_4242", ("E2E-TEA", 3))

    document = problem(post_order(e2e, json.dumps(bigger).encode(), key), 422)

    assert f"'{key}'" in document["detail"]
    job = first.json()["job_id"]
    wait_for(lambda: e2e.receipt_mail(job), timeout=60, what="the first order's receipt")
    assert [c.amount for c in e2e.charges_for(job)] == [ONE_TEA]
    assert len(e2e.receipt_mails(job)) == 1


def test_a_page_size_of_4301_digits_is_a_400_naming_page_size(e2e: E2E) -> None:
    response = e2e.api.request("GET", "failed-sessions", params={"page_size": "9" * 4301})

    assert problem(response, 400)["errors"] == [
        {"field": "page_size", "problem": "must be a whole number from 1 to 200"}
    ]


@pytest.mark.parametrize(
    ("document", "status", "field"),
    [({"task": "T" * 32_000}, 413, "body"), ({"reason": "R" * 2_000}, 400, "reason")],
    ids=["task-of-32000-characters", "reason-of-2000-characters"],
)
def test_a_bulk_replay_with_an_oversized_filter_is_refused_and_requests_nothing(
    e2e: E2E, document: dict[str, str], status: int, field: str
) -> None:
    requests = TableClient.from_connection_string(
        e2e.stack.storage_connection_string, REPLAY_REQUESTS_TABLE
    )
    before = len(list(requests.list_entities(select=["RowKey"])))

    refused = problem(e2e.api.request("POST", "replays", body=document), status)

    assert refused["errors"][0]["field"] == field
    assert len(list(requests.list_entities(select=["RowKey"]))) == before  # nothing saved


def test_a_20_mib_replay_body_is_a_413_and_replays_nothing(e2e: E2E) -> None:
    job = e2e.api.submit_order(order("tok_declined"), idempotency_key=str(uuid.uuid4()))["job_id"]
    e2e.archived_session(job)

    response = e2e.api.request(
        "POST",
        f"failed-sessions/{job}/replay",
        body=b" " * (20 * 1024 * 1024),
        headers={"Idempotency-Key": "k"},
    )

    assert problem(response, 413)["errors"] == [
        {"field": "body", "problem": "is 20971520 bytes; send at most 4096 bytes"}
    ]
    session = e2e.api.failed_session(job)
    assert (session["status"], session["claim"]) == ("failed", None)
