"""Exactly once under concurrency, through the local host: ten clients at once (threads, all
released by one barrier) replaying one failed session with ten keys or with one key,
requesting bulk replays of one group, or placing one order with one key. Whatever the
interleaving, one replay session or one order runs: one charge, one receipt e-mail, and only
the documented status codes. Where a row names the answer to a request that arrives while
another is in flight, the test holds the first in flight (``tests/held_replay.py``) so that
answer is certain."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest

from localdev.api_client import ApiResponse
from shared.adapters.table_keys import table_key
from shared.domain.archive import replay_session_id
from tests.held_replay import replays_held

from .conftest import E2E, order, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("catalogue")]

CLIENTS = 10
T = TypeVar("T")


def at_once(attempt: Callable[[int], T], *, clients: int = CLIENTS) -> list[T]:
    """``attempt(0..clients - 1)`` in as many threads, released together."""
    start = threading.Barrier(clients)

    def run(n: int) -> T:
        start.wait()
        return attempt(n)

    with ThreadPoolExecutor(max_workers=clients) as pool:
        return list(pool.map(run, range(clients)))


def failed_orders(e2e: E2E, card: str, count: int) -> list[str]:
    """``count`` orders that failed at ProcessPayment (the provider down for ``card``), each
    archived whole; the provider is back afterwards."""
    jobs = [
        e2e.api.submit_order(order(card), idempotency_key=str(uuid.uuid4()))["job_id"]
        for _ in range(count)
    ]
    for job in jobs:
        session = e2e.archived_session(job)
        assert (session["failed_task"], session["reason"]) == (
            "ProcessPayment",
            "PaymentProviderUnavailable",
        )
    e2e.payments.reset_outage()
    return jobs


def replay(e2e: E2E, session_id: str, key: str) -> ApiResponse:
    return e2e.api.request(
        "POST", f"failed-sessions/{session_id}/replay", headers={"Idempotency-Key": key}
    )


def follow(e2e: E2E, location: str) -> dict[str, Any]:
    """GET a Location header (an absolute URL of the API) and return its document."""
    assert location.startswith(e2e.api.api_url + "/"), location
    response = e2e.api.request("GET", location.removeprefix(e2e.api.api_url + "/"))
    assert response.status == 200, (location, response.body)
    return dict(response.json())


def completed_once(e2e: E2E, job: str) -> dict[str, Any]:
    """Wait until the job's receipt is mailed, then check it was mailed and charged once."""
    wait_for(lambda: e2e.receipt_mail(job), timeout=60, what=f"the receipt of {job}")

    def completed() -> dict[str, Any] | None:
        document = dict(e2e.api.request("GET", f"orders/{job}").json())
        return document if document["status"] == "completed" else None

    status = wait_for(completed, timeout=30, what=f"order {job} completed")
    assert len(e2e.receipt_mails(job)) == 1, "the receipt was mailed more than once"
    assert len(e2e.charges_for(job)) == 1, "the card was charged more than once"
    return dict(status)


def test_ten_replays_of_one_session_with_ten_keys_replay_it_once(e2e: E2E, outage: str) -> None:
    [job] = failed_orders(e2e, outage, 1)
    keys = [f"ten-keys-{n}-{uuid.uuid4().hex[:6]}" for n in range(CLIENTS)]

    responses = at_once(lambda n: replay(e2e, job, keys[n]))

    assert sorted(r.status for r in responses) == [202] + [409] * (CLIENTS - 1)
    [won] = [r for r in responses if r.status == 202]
    new_session = won.json()["new_session_id"]
    for lost in (r for r in responses if r.status == 409):
        assert lost.headers["Content-Type"].startswith("application/problem+json")
        assert lost.json()["replay"]["new_session_id"] == new_session
    status = completed_once(e2e, job)
    assert status["replayed_as"] == new_session
    assert follow(e2e, won.headers["Location"])["status"] == "completed"
    candidates = {replay_session_id(job, key) for key in keys}
    assert e2e.sessions_that_ran(candidates) == {new_session}


def test_replays_with_the_key_of_a_replay_in_flight_are_409s_that_send_nothing(
    e2e: E2E, outage: str
) -> None:
    """Row C4, as an interleaving: the first replay with key K has written its Idempotency-Key
    record and its claim and is held at the send (``tests/held_replay.py``); nine more with K,
    at once, are each answered before it goes on."""
    [job] = failed_orders(e2e, outage, 1)
    key = f"one-key-{uuid.uuid4().hex[:6]}"
    new_session = replay_session_id(job, key)

    with replays_held() as held, ThreadPoolExecutor(max_workers=1) as first_client:
        first = first_client.submit(replay, e2e, job, key)
        held.wait_reached()
        in_flight = e2e.table("idempotencykeys").get_entity(
            table_key(f"replay:{job}"), table_key(key)
        )
        assert in_flight.get("result") is None, "the first replay is in flight"

        refused = at_once(lambda _: replay(e2e, job, key), clients=CLIENTS - 1)

        for busy in refused:
            assert busy.status == 409, (busy.status, busy.body)
            assert busy.headers["Retry-After"] == "5"
            detail = busy.json()["detail"]
            # The winner named: the request with K, by when it started.
            assert f"Idempotency-Key {key!r} that started at {in_flight['started_at']}" in detail
            assert "still being processed" in detail
        # Nothing done by the refused: only the first reached the send, and it has sent nothing.
        assert held.sessions == [new_session]
        assert e2e.sessions_that_ran({new_session}) == set()
        assert e2e.api.failed_session(job)["status"] != "replayed"
        held.release()
        won = first.result(timeout=60)

    assert won.status == 202, (won.status, won.body)
    assert won.json()["new_session_id"] == new_session
    completed_once(e2e, job)
    assert e2e.sessions_that_ran({new_session}) == {new_session}
    again = replay(e2e, job, key)  # after the rush: the stored first response
    assert (again.status, again.json()) == (202, won.json())


def test_concurrent_bulk_replays_of_one_group_replay_each_session_once(
    e2e: E2E, outage: str
) -> None:
    jobs = failed_orders(e2e, outage, 3)
    group = {
        "queue": e2e.purchase_queue,
        "task": "ProcessPayment",
        "reason": "PaymentProviderUnavailable",
    }

    responses = at_once(lambda _: e2e.api.request("POST", "replays", body=group))

    assert [r.status for r in responses] == [202] * CLIENTS
    requests = [r.json()["request_id"] for r in responses]

    def all_completed() -> list[dict[str, Any]] | None:
        documents = [follow(e2e, r.headers["Location"]) for r in responses]
        return documents if all(d["status"] == "completed" for d in documents) else None

    finals = wait_for(all_completed, timeout=90, what="every bulk replay completed")
    for job in jobs:
        completed_once(e2e, job)
        summary = e2e.api.failed_session(job)
        assert summary["status"] == "replayed"
        assert summary["replay_key"] in {f"bulk:{r}" for r in requests}
        candidates = {replay_session_id(job, f"bulk:{r}") for r in requests}
        assert e2e.sessions_that_ran(candidates) == {summary["replayed_session_id"]}
    # Each request accounts for every session it found: sent by it, or taken by another.
    assert all(f["found"] == f["sent"] + f["taken"] + f["failed"] for f in finals)
    assert all(f["failed"] == 0 for f in finals)
    assert sum(f["sent"] for f in finals) >= len(jobs)


def test_ten_orders_with_one_key_are_one_order(e2e: E2E) -> None:
    key = f"one-order-{uuid.uuid4().hex[:6]}"

    responses = at_once(
        lambda _: e2e.api.request(
            "POST", "orders", body=order("tok_visa_4242"), headers={"Idempotency-Key": key}
        )
    )

    statuses = [r.status for r in responses]
    assert set(statuses) <= {202, 409} and 202 in statuses, statuses
    accepted = [r.json() for r in responses if r.status == 202]
    assert all(document == accepted[0] for document in accepted)
    job = accepted[0]["job_id"]
    status = completed_once(e2e, job)
    assert status["total"] and status["order_number"]
    assert len([r for r in e2e.invocations.of("purchase_tasks") if r.session_id == job]) == 5
