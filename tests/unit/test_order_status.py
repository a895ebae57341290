"""GET /api/orders/{job_id}'s answers, from what the order's messages did: the real processor
(which records how each session ended) and in-memory twins. How far a session that has not
ended got is read from the effects its tasks left: an order number, a charge."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from shared.domain.envelope import TaskMessage
from shared.domain.order_status import OrderNotFound, OrderStatus, order_status
from shared.domain.pipelines import PURCHASE, PURCHASE_TASKS
from shared.service_layer.dead_letters import archive_dead_letters
from shared.service_layer.jobs import StartedJob, start_job
from shared.service_layer.observers import order_end_observer
from shared.service_layer.orders import OrderLookup
from shared.service_layer.ports import DeadLetter
from shared.service_layer.processor import IncomingMessage, Outcome, SessionProcessor
from shared.service_layer.replay import replay_session
from tests.builders import PIPELINES, dead_letter
from tests.fakes import (
    InMemoryAuditTrail,
    InMemoryDeadLetterArchive,
    InMemoryDeadLetterQueue,
    InMemoryOrderProgress,
    InMemoryResender,
    InMemorySessionActions,
    InMemorySessionOutcomes,
    InMemorySessionSeeder,
    InMemoryTaskSender,
)

from .test_pipelines import ORDER, Shop


class Store:
    def __init__(self, *, step_rows: bool = False) -> None:
        self.step_rows = step_rows  # ORDER_STEP_ROWS: the end row a release before reads
        self.shop = Shop()
        self.progress = InMemoryOrderProgress()
        self.sessions = InMemorySessionOutcomes()
        self.archive = InMemoryDeadLetterArchive()
        self.sender = InMemoryTaskSender()
        self.dlq = InMemoryDeadLetterQueue()
        self.actions: dict[str, InMemorySessionActions] = {}

    def processor(self) -> SessionProcessor:
        processor = self.shop.processor()
        return SessionProcessor(
            pipeline=processor.pipeline,
            tasks=processor.tasks,
            policy=processor.policy,
            retry=replace(processor.retry, window=0),
            journal=self.archive,
            outcomes=self.sessions,
            observer=order_end_observer(self.progress, last_step=len(PURCHASE_TASKS))
            if self.step_rows
            else None,
        )

    def submit(self, **changes: Any) -> StartedJob:
        return start_job(
            PIPELINES.get(PURCHASE),
            {**ORDER, **changes},
            sender=self.sender,
            queue_name="q",
            acceptance=self.progress,
        )

    def run(self, session_index: int, steps: int) -> None:
        """Deliver the first ``steps`` messages of a sent session; dead letters go to the DLQ."""
        queue, session_id, messages = self.sender.sessions[session_index]
        actions = self.actions.setdefault(session_id, InMemorySessionActions())
        processor = self.processor()
        for message in messages[:steps]:
            incoming = IncomingMessage(
                body=message.to_json(),
                session_id=session_id,
                application_properties=message.application_properties(),
            )
            result = processor.handle(incoming, actions)
            if result.outcome is Outcome.DEAD_LETTERED:
                self.dlq.add(_letter(queue, session_id, message, result.reason or ""))

    def run_replay(
        self, session_id: str, resender: InMemoryResender, seeder: InMemorySessionSeeder
    ) -> None:
        """Deliver what a replay sent, from the state it seeded."""
        actions = InMemorySessionActions(state=seeder.states[("q", session_id)])
        processor = self.processor()
        for _, _, message in resender.sent:
            incoming = IncomingMessage(
                body=message.body,
                session_id=session_id,
                application_properties=message.application_properties,
            )
            assert processor.handle(incoming, actions).outcome is Outcome.COMPLETED

    def status(self, job_id: str) -> OrderStatus:
        lookup = OrderLookup(
            self.progress,
            self.shop.order_numbers,
            self.shop.payments,
            self.archive,
            InMemoryAuditTrail(),
            self.sessions,
            self.shop.receipt_emails,
        )
        return lookup.status(job_id)


def _letter(queue: str, session_id: str, message: TaskMessage, reason: str) -> DeadLetter:
    return dead_letter(
        message,
        reason,
        queue=queue,
        session_id=session_id,
        description=reason,
        enqueued_time=None,
        sequence_number=message.step,
    )


def test_an_order_is_accepted_then_running_at_its_next_step_then_completed() -> None:
    store = Store()
    order = store.submit()

    accepted = store.status(order.job_id)
    assert (accepted.status, accepted.next_step, accepted.next_task) == (
        "accepted",
        1,
        PURCHASE_TASKS[0],
    )

    store.run(0, 1)
    numbered = store.status(order.job_id)
    assert (numbered.status, numbered.next_step, numbered.next_task) == (
        "running",
        2,
        "CalculateTotal",
    )
    assert numbered.order_number == "ORD-00000001" and numbered.total is None

    store.run(0, 3)
    charged = store.status(order.job_id)
    assert (charged.status, charged.next_step, charged.next_task) == (
        "running",
        4,
        "GenerateReceipt",
    )
    assert (charged.total, charged.currency) == ("29.95", "EUR")

    store.run(0, 5)
    done = store.status(order.job_id)
    assert (done.status, done.next_step) == ("completed", None)
    assert (done.order_number, done.total, done.currency) == ("ORD-00000001", "29.95", "EUR")
    # The repeatable send's record stays as its first attempt wrote it; the completed task
    # says it went out
    assert store.shop.receipt_emails.find(order.job_id).status == "sending"  # type: ignore[union-attr]
    assert done.receipt_email is not None and done.receipt_email.status == "sent"


def test_a_failed_order_names_the_task_and_why_and_a_replay_carries_it_to_completion() -> None:
    store = Store()
    order = store.submit(card_token="tok_outage")
    store.run(0, 5)
    archive_dead_letters(store.dlq, store.archive, queues=["q"])

    failed = store.status(order.job_id)
    assert (failed.status, failed.failed_task, failed.reason) == (
        "failed",
        "ProcessPayment",
        "PaymentProviderUnavailable",
    )
    assert failed.description and "Gave up" in failed.description
    assert (failed.order_number, failed.total) == ("ORD-00000001", "29.95")  # from the record

    store.shop.payments.outage_tokens.clear()
    resender, seeder = InMemoryResender(), InMemorySessionSeeder()
    result = replay_session(
        store.archive, resender, seeder, order.session_id, "fix-1", pipelines=PIPELINES
    )
    replayed = store.status(order.job_id)
    assert (replayed.status, replayed.replayed_as, replayed.next_step) == (
        "replayed",
        result.new_session_id,
        3,
    )

    store.run_replay(result.new_session_id, resender, seeder)

    done = store.status(order.job_id)
    assert (done.status, done.replayed_as) == ("completed", result.new_session_id)
    assert (done.order_number, done.total) == ("ORD-00000001", "29.95")


def test_an_unknown_order_is_not_found() -> None:
    with pytest.raises(OrderNotFound, match="'nope'"):
        Store().status("nope")


def as_a_release_before_reads_it(store: Store, job_id: str) -> OrderStatus:
    """Where the order stands by its rows alone, as releases before this one read it."""
    record = store.progress.find(job_id)
    assert record is not None
    none: Any = {"order_number": None, "charged": None, "failure": None, "claim": None}
    return order_status(record, PURCHASE_TASKS, **none)


def test_with_step_rows_a_release_before_reads_each_order_as_it_ended_from_one_row() -> None:
    store = Store(step_rows=True)
    paid, declined = store.submit(), store.submit(card_token="tok_outage")
    store.run(0, 5)
    store.run(1, 5)

    assert as_a_release_before_reads_it(store, paid.job_id).status == "completed"
    failed = as_a_release_before_reads_it(store, declined.job_id)
    assert (failed.status, failed.failed_task, failed.reason) == (
        "failed",
        "ProcessPayment",
        "PaymentProviderUnavailable",
    )
    # one row an order: its end
    assert [len(store.progress.steps[job]) for job in (paid.job_id, declined.job_id)] == [1, 1]


def test_without_step_rows_an_order_has_its_acceptance_alone() -> None:
    store = Store()
    order = store.submit()
    store.run(0, 5)

    assert store.progress.steps.get(order.job_id, {}) == {}
    assert store.status(order.job_id).status == "completed"
