"""Purchases end to end: POST /api/orders, the five tasks in order within each session, a
failure that short-circuits the rest into the archive, and replay after an outage."""

from __future__ import annotations

import itertools
import uuid
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import Any

import pytest
from azure.servicebus.exceptions import SessionCannotBeLockedError

from shared.adapters.azure_clients import DEAD_LETTERS_TABLE, PAYMENTS_TABLE
from shared.adapters.table_keys import table_key
from shared.domain.pipelines import PURCHASE_TASKS

from .conftest import (
    E2E,
    MAX_CONCURRENT_SESSIONS,
    TASK_ATTEMPTS,
    Invocation,
    charged_total,
    order,
    wait_for,
)

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("catalogue")]

# 2 x 10.00 + 1 x 5.50 = 25.50; 25% tax = 6.375 -> 6.38; shipping 4.95: total 36.83.
BASKET = (("E2E-TEA", 2), ("E2E-MUG", 1))
BASKET_TOTAL = Decimal("36.83")


def submit(e2e: E2E, document: dict[str, Any]) -> str:
    accepted = e2e.api.submit_order(document, idempotency_key=str(uuid.uuid4()))
    assert accepted["tasks"] == list(PURCHASE_TASKS)
    return str(accepted["job_id"])


def test_every_session_runs_its_tasks_one_at_a_time_in_order_within_the_session_limit(
    e2e: E2E,
) -> None:
    # Twelve customers at once: more sessions than the host may hold (4 in this host.json).
    with ThreadPoolExecutor(max_workers=12) as pool:
        jobs = list(pool.map(lambda _: submit(e2e, order("tok_visa_4242", *BASKET)), range(12)))

    mails = wait_for(
        lambda: (
            all(e2e.receipt_mail(job) for job in jobs) and [e2e.receipt_mail(job) for job in jobs]
        ),
        timeout=90,
        what="twelve receipts mailed",
    )

    for job, mail in zip(jobs, mails, strict=True):
        assert charged_total(mail) == BASKET_TOTAL
        (pdf,) = [p for p in mail.iter_attachments() if p.get_content_type() == "application/pdf"]
        assert pdf.get_content().startswith(b"%PDF")
        (charge,) = e2e.charges_for(job)
        assert charge.amount == BASKET_TOTAL
        assert e2e.api.request("GET", f"failed-sessions/{job}").status == 404
    runs = [r for r in e2e.invocations.of("purchase_tasks") if r.session_id in jobs]
    spans = []
    for job in jobs:
        in_session = [r for r in runs if r.session_id == job]
        assert [r.message_id for r in in_session] == [f"{job}:{step}" for step in range(1, 6)]
        for before, after in itertools.pairwise(in_session):
            assert before.ended is not None and after.started >= before.ended, "overlapped"
        spans.append((in_session[0].started, in_session[-1].ended))
    # A session is held from before its first task until after its last one, so sessions
    # whose task spans overlap were held at the same time.
    assert 1 < most_at_once(spans) <= MAX_CONCURRENT_SESSIONS


def most_at_once(spans: list[tuple[float, float | None]]) -> int:
    edges = sorted([(start, 1) for start, _ in spans] + [(end or 0.0, -1) for _, end in spans])
    running = most = 0
    for _, change in edges:
        running += change
        most = max(most, running)
    return most


def test_a_failed_payment_short_circuits_the_later_tasks_into_the_archive_in_order(
    e2e: E2E,
) -> None:
    job = submit(e2e, order("tok_declined", *BASKET))

    session = e2e.archived_session(job)

    assert (session["failed_task"], session["reason"]) == ("ProcessPayment", "PaymentDeclined")
    assert session["context"]["order_number"] and session["context"]["total"] == "36.83"
    messages = session["messages"]
    assert [(m["step"], m["task"], m["reason"]) for m in messages] == [
        (3, "ProcessPayment", "PaymentDeclined"),
        (4, "GenerateReceipt", "SessionFailed"),
        (5, "SendReceiptEmail", "SessionFailed"),
    ]
    assert all("failed at step 3 (ProcessPayment)" in m["description"] for m in messages[1:])
    sequence = [m["sequence_number"] for m in messages]
    assert sequence == sorted(sequence)
    # The storage account holds the same rows, keyed so that a partition scan is send order.
    rows = list(
        e2e.table(DEAD_LETTERS_TABLE).query_entities(
            "PartitionKey eq @pk", parameters={"pk": table_key(job)}
        )
    )
    assert [r["RowKey"] for r in rows] == sorted(r["RowKey"] for r in rows)
    assert [r["task"] for r in rows] == ["ProcessPayment", "GenerateReceipt", "SendReceiptEmail"]
    assert e2e.charges_for(job) == []
    assert e2e.receipt_mail(job) is None
    groups = e2e.api.failure_groups(queue=e2e.purchase_queue)
    assert any(
        (g["failed_task"], g["reason"]) == ("ProcessPayment", "PaymentDeclined") for g in groups
    )


def test_a_replay_after_an_outage_completes_with_the_original_order_number_and_total(
    e2e: E2E, outage: str
) -> None:
    job = submit(e2e, order(outage, *BASKET))
    session = e2e.archived_session(job)
    assert (session["failed_task"], session["reason"]) == (
        "ProcessPayment",
        "PaymentProviderUnavailable",
    )
    order_number, total = session["context"]["order_number"], session["context"]["total"]
    # The processor retried the payment in its invocation, holding the session, before it
    # gave up, counting the attempts itself: the trigger's delivery count may be missing (None
    # in Azure), and no delivery was spent on a retry.
    payment_runs = [r for r in e2e.invocations.of("purchase_tasks") if r.message_id == f"{job}:3"]
    assert len(payment_runs) == 1
    description = session["messages"][0]["description"]
    assert description.startswith("Gave up: the payment provider was out of reach for ")
    assert f"({TASK_ATTEMPTS} attempts;" in description

    e2e.payments.reset_outage()
    replay = e2e.api.replay(job, idempotency_key="fix-1")

    assert replay["sent"] == 3
    new_session = replay["new_session_id"]
    assert new_session != job
    mail = wait_for(lambda: e2e.receipt_mail(job), timeout=30, what="the replayed receipt")
    assert f"order {order_number}" in str(mail["Subject"])
    assert charged_total(mail) == Decimal(total) == BASKET_TOTAL
    (charge,) = e2e.charges_for(job)
    assert charge.amount == BASKET_TOTAL
    cards = list(
        e2e.table(PAYMENTS_TABLE).query_entities("CardToken eq @card", parameters={"card": outage})
    )
    assert len(cards) == 1, "the card was charged more than once"

    # The last task mails the receipt before its invocation ends: wait for all three to end.
    def ended_replay_runs() -> list[Invocation] | None:
        runs = [r for r in e2e.invocations.of("purchase_tasks") if r.session_id == new_session]
        return runs if len(runs) == 3 and all(r.succeeded is not None for r in runs) else None

    replayed_runs = wait_for(ended_replay_runs, what="the replayed tasks' invocations")
    assert all(r.succeeded for r in replayed_runs)
    summary = e2e.api.failed_session(job)
    assert (summary["status"], summary["replayed_session_id"]) == ("replayed", new_session)

    again = e2e.api.replay(job, idempotency_key="fix-1")
    assert again == replay  # the stored first response: nothing is sent again
    assert len(e2e.receipt_mails(job)) == 1
    other_key = e2e.api.request(
        "POST", f"failed-sessions/{job}/replay", headers={"Idempotency-Key": "fix-2"}
    )
    assert other_key.status == 409
    assert (
        e2e.api.request(
            "POST", "failed-sessions/no-such-session/replay", headers={"Idempotency-Key": "k"}
        ).status
        == 404
    )
    assert_state_cleared(e2e, new_session)


def test_session_state_is_cleared_when_a_session_ends(e2e: E2E) -> None:
    completed = submit(e2e, order("tok_visa_4242", *BASKET))
    failed = submit(e2e, order("tok_declined", *BASKET))
    wait_for(lambda: e2e.receipt_mail(completed), timeout=30, what="the receipt")
    e2e.archived_session(failed)

    assert_state_cleared(e2e, completed)
    assert_state_cleared(e2e, failed)


def assert_state_cleared(e2e: E2E, session_id: str) -> None:
    def state() -> tuple[bytes | None] | None:
        try:
            with e2e.servicebus.get_queue_receiver(
                e2e.purchase_queue, session_id=session_id, max_wait_time=1
            ) as receiver:
                return (receiver.session.get_state(),)
        except SessionCannotBeLockedError:
            return None  # the host still holds it until it has been idle for a second

    (value,) = wait_for(state, timeout=15, what=f"session {session_id} free")
    assert not value, f"session {session_id} still has state {value!r}"
