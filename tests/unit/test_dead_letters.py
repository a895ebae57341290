"""Archiving dead letters and replaying failed sessions, with in-memory twins."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from shared.domain.archive import (
    AlreadyReplayed,
    FailureRecord,
    ReplayIncomplete,
    SessionNotArchived,
    replay_session_id,
    row_key,
)
from shared.domain.confirmations import Selection
from shared.domain.envelope import TaskMessage, parse_task_message
from shared.domain.errors import InvalidInput, PermanentTaskError
from shared.domain.pipelines import PRODUCT_IMPORT, import_message
from shared.domain.products import Product
from shared.domain.replays import ReplayRequest
from shared.domain.session_state import decode_session_state
from shared.service_layer.bulk_replay import (
    mark_bulk_replay_failed,
    request_bulk_replay,
    run_bulk_replay,
)
from shared.service_layer.dead_letters import archive_dead_letters
from shared.service_layer.observers import import_progress_observer
from shared.service_layer.ports import OutgoingMessage
from shared.service_layer.processor import (
    FailurePolicy,
    IncomingMessage,
    Outcome,
    RetryPolicy,
    SessionProcessor,
)
from shared.service_layer.product_import_tasks import import_tasks
from shared.service_layer.replay import replay_session
from tests.builders import NOW, PIPELINES, dead_letter, failed_purchase, purchase_dead_letter
from tests.fakes import (
    FakeTime,
    InMemoryAuditTrail,
    InMemoryDeadLetterArchive,
    InMemoryDeadLetterQueue,
    InMemoryImportProgress,
    InMemoryProductCatalog,
    InMemoryReplayRequests,
    InMemoryResender,
    InMemorySessionActions,
    InMemorySessionSeeder,
)


@pytest.fixture
def world():
    dlq = InMemoryDeadLetterQueue()
    archive = InMemoryDeadLetterArchive()
    return dlq, archive


def test_archive_writes_rows_by_session_then_completes_them(world) -> None:
    dlq, archive = world
    dlq.add(*failed_purchase("s-1"))
    dlq.add(*failed_purchase("s-2", from_step=2, reason="UnknownSku"))
    archive.record(
        "s-1",
        FailureRecord(
            "ProcessPayment",
            3,
            "PaymentProviderUnavailable",
            "gave up",
            NOW.isoformat(),
            {"order_number": "ORD-7"},
        ),
    )

    report = archive_dead_letters(dlq, archive, queues=["purchase-tasks"], clock=lambda: NOW)

    assert report.total == 7 and report.sessions == {"s-1", "s-2"}
    assert len(dlq.completed) == 7 and dlq.letters["purchase-tasks"] == []
    rows = archive.list_session("s-1")
    assert [r.step for r in rows] == [3, 4, 5]
    assert [r.row_key for r in rows] == sorted(r.row_key for r in rows)
    assert rows[0].row_key == row_key(rows[0].sequence_number) and len(rows[0].row_key) == 20
    assert (rows[0].task, rows[0].reason, rows[-1].is_last) == (
        "ProcessPayment",
        "PaymentProviderUnavailable",
        True,
    )
    s1 = archive.get_summary("s-1")
    assert (s1.failed_task, s1.reason, s1.message_count, s1.has_last) == (
        "ProcessPayment",
        "PaymentProviderUnavailable",
        3,
        True,
    )
    assert s1.context == {"order_number": "ORD-7"}
    s2 = archive.get_summary("s-2")  # no record: the first non-SessionFailed row tells
    assert (s2.failed_task, s2.reason, s2.message_count) == ("CalculateTotal", "UnknownSku", 4)


def test_archive_work_is_bounded_by_count_and_time(world) -> None:
    dlq, archive = world
    for n in range(30):
        dlq.add(purchase_dead_letter(f"s-{n}", 5, "SessionFailed"))

    by_count = archive_dead_letters(
        dlq, archive, queues=["purchase-tasks"], max_messages=12, batch_size=5
    )
    ticks = iter([0.0, 0.0, 5.0, 11.0])  # start, then before each batch
    by_time = archive_dead_letters(
        dlq,
        archive,
        queues=["purchase-tasks"],
        max_seconds=10,
        batch_size=5,
        monotonic=lambda: next(ticks),
    )

    assert (by_count.total, by_count.stopped_early) == (12, True)
    assert (by_time.total, by_time.stopped_early) == (10, True)
    assert len(dlq.letters["purchase-tasks"]) == 8


def test_a_crash_between_row_write_and_completion_loses_and_duplicates_nothing(world) -> None:
    dlq, archive = world
    dlq.add(*failed_purchase("s-1"))

    class Crash(Exception):
        pass

    dlq.crash_on_complete = Crash()
    with pytest.raises(Crash):
        archive_dead_letters(dlq, archive, queues=["purchase-tasks"])
    dlq.crash_on_complete = None
    assert len(archive.list_session("s-1")) == 3  # written ...
    assert len(dlq.letters["purchase-tasks"]) == 3  # ... and still dead-lettered

    archive_dead_letters(dlq, archive, queues=["purchase-tasks"])

    assert len(archive.list_session("s-1")) == 3  # upsert: the same rows, not six
    assert dlq.letters["purchase-tasks"] == []


def archived(world, session="s-1", **kwargs):
    dlq, archive = world
    dlq.add(*failed_purchase(session, **kwargs))
    archive.record(
        session,
        FailureRecord(
            "ProcessPayment",
            3,
            "PaymentProviderUnavailable",
            "gave up",
            NOW.isoformat(),
            {"order_number": "ORD-7", "total": "29.95"},
        ),
    )
    archive_dead_letters(dlq, archive, queues=["purchase-tasks"])
    return archive


def test_replay_sends_the_rows_in_order_under_a_new_seeded_session(world) -> None:
    archive = archived(world)
    resender, seeder = InMemoryResender(), InMemorySessionSeeder()
    originals = archive.list_session("s-1")

    result = replay_session(
        archive, resender, seeder, "s-1", "key-1", clock=lambda: NOW, pipelines=PIPELINES
    )

    assert result.new_session_id == replay_session_id("s-1", "key-1") != "s-1"
    assert [m.body for _, _, m in resender.sent] == [r.body for r in originals]
    assert {(q, s) for q, s, _ in resender.sent} == {("purchase-tasks", result.new_session_id)}
    state = decode_session_state(seeder.states[("purchase-tasks", result.new_session_id)])
    assert state is not None
    assert state.next_step == 3 and state.context == {"order_number": "ORD-7", "total": "29.95"}
    rows = archive.list_session("s-1")
    assert {(r.status, r.replayed_session_id, r.replay_key) for r in rows} == {
        ("replayed", result.new_session_id, "key-1")
    }
    summary = archive.get_summary("s-1")
    assert (summary.status, summary.replayed_session_id) == ("replayed", result.new_session_id)


def test_repeating_a_replay_with_the_same_key_sends_nothing_new(world) -> None:
    archive = archived(world)
    seen: set[str] = set()
    first = InMemoryResender(seen_ids=seen)
    replay_session(archive, first, InMemorySessionSeeder(), "s-1", "key-1", pipelines=PIPELINES)
    again = InMemoryResender(seen_ids=seen)

    result = replay_session(
        archive, again, InMemorySessionSeeder(), "s-1", "key-1", pipelines=PIPELINES
    )

    assert result.sent == 0 and again.sent == []


def test_a_replay_under_another_key_is_refused(world) -> None:
    archive = archived(world)
    replay_session(
        archive, InMemoryResender(), InMemorySessionSeeder(), "s-1", "key-1", pipelines=PIPELINES
    )
    with pytest.raises(AlreadyReplayed) as error:
        replay_session(
            archive,
            InMemoryResender(),
            InMemorySessionSeeder(),
            "s-1",
            "key-2",
            pipelines=PIPELINES,
        )
    assert error.value.replayed_session_id == replay_session_id("s-1", "key-1")


def test_replay_refuses_unknown_and_incomplete_sessions_and_a_missing_key(world) -> None:
    archive = archived(world, upto=4)  # the last message is not archived yet
    resender = InMemoryResender()
    with pytest.raises(SessionNotArchived):
        replay_session(archive, resender, InMemorySessionSeeder(), "nope", "k", pipelines=PIPELINES)
    with pytest.raises(ReplayIncomplete, match="force"):
        replay_session(archive, resender, InMemorySessionSeeder(), "s-1", "k", pipelines=PIPELINES)
    with pytest.raises(InvalidInput):
        replay_session(archive, resender, InMemorySessionSeeder(), "s-1", " ", pipelines=PIPELINES)
    assert resender.sent == []
    forced = replay_session(
        archive, resender, InMemorySessionSeeder(), "s-1", "k", force=True, pipelines=PIPELINES
    )
    assert forced.sent == 2


def test_the_processor_records_the_first_failure_with_its_context() -> None:
    journal = InMemoryDeadLetterArchive()

    def fail(_call):
        raise PermanentTaskError("PaymentDeclined", "declined")

    processor = SessionProcessor(
        pipeline="purchase",
        tasks={"A": lambda call: {"order_number": "ORD-1"}, "B": fail, "C": lambda c: {}},
        policy=FailurePolicy.STOP_ON_FAILURE,
        journal=journal,
    )
    actions = InMemorySessionActions()
    for step, task in enumerate("ABC", 1):
        body = TaskMessage(
            job_id="j", pipeline="purchase", task=task, step=step, is_last=step == 3, payload={}
        ).to_json()
        processor.handle(IncomingMessage(body=body, session_id="s-9"), actions)

    record = journal.records["s-9"]
    assert (record.task, record.step, record.reason) == ("B", 2, "PaymentDeclined")
    assert record.context == {"order_number": "ORD-1"}


def test_bulk_replay_replays_every_matching_session_and_reports_progress(world) -> None:
    dlq, archive = world
    for n in range(5):
        dlq.add(*failed_purchase(f"pay-{n}"))
    dlq.add(*failed_purchase("sku-0", from_step=2, reason="UnknownSku"))
    dlq.add(*failed_purchase("pay-incomplete", upto=4))
    archive_dead_letters(dlq, archive, queues=["purchase-tasks"])
    requests = InMemoryReplayRequests()
    seen: set[str] = set()

    with pytest.raises(InvalidInput):
        request_bulk_replay(requests, requests, Selection())
    request = request_bulk_replay(
        requests, requests, Selection(reason="PaymentProviderUnavailable")
    )
    assert requests.queued == [request.request_id] and request.status == "queued"

    done = run_bulk_replay(
        requests,
        archive,
        InMemoryResender(seen_ids=seen),
        InMemorySessionSeeder(),
        request.request_id,
        page_size=2,
        audit=InMemoryAuditTrail(),
        pipelines=PIPELINES,
    )

    assert (done.status, done.found, done.sent, done.failed) == ("completed", 6, 5, 1)
    assert done.errors[0]["session_id"] == "pay-incomplete"
    assert archive.get_summary("sku-0").status == "failed"
    again = InMemoryResender(seen_ids=seen)
    assert (
        run_bulk_replay(
            requests,
            archive,
            again,
            InMemorySessionSeeder(),
            request.request_id,
            audit=InMemoryAuditTrail(),
            pipelines=PIPELINES,
        )
        == done
    )
    assert again.sent == []


def test_a_bulk_replay_that_keeps_failing_says_so_in_its_status() -> None:
    requests = InMemoryReplayRequests()
    request = request_bulk_replay(requests, requests, Selection(task="ProcessPayment"))
    failed = mark_bulk_replay_failed(requests, request.request_id, "storage unreachable")
    assert (failed.status, failed.failure) == ("failed", "storage unreachable")


def test_a_bulk_replay_that_cannot_be_queued_is_failed_not_queued_forever() -> None:
    requests = InMemoryReplayRequests()

    class Unreachable:
        def enqueue(self, request_id: str) -> None:
            raise ConnectionError("queue service unreachable")

    with pytest.raises(ConnectionError):
        request_bulk_replay(requests, Unreachable(), Selection(task="ProcessPayment"))

    [request] = requests.requests.values()
    assert request.status == "failed" and request.sent == 0
    assert "ConnectionError" in (request.failure or "") and "again" in (request.failure or "")


def test_failed_sessions_are_grouped_by_queue_task_and_reason(world) -> None:
    from shared.service_layer.failed_sessions import FailureGroup, group_failed_sessions

    dlq, archive = world
    for n in range(3):
        dlq.add(*failed_purchase(f"pay-{n}"))
    dlq.add(*failed_purchase("sku-0", from_step=2, reason="UnknownSku"))
    archive_dead_letters(dlq, archive, queues=["purchase-tasks"])
    replay_session(
        archive, InMemoryResender(), InMemorySessionSeeder(), "pay-0", "k", pipelines=PIPELINES
    )

    assert group_failed_sessions(archive) == [
        FailureGroup("purchase-tasks", "ProcessPayment", "PaymentProviderUnavailable", 2),
        FailureGroup("purchase-tasks", "CalculateTotal", "UnknownSku", 1),
    ]
    assert sum(g.sessions for g in group_failed_sessions(archive, status=None)) == 4


# -- import sessions: only the bad rows are archived ------------------------------------------

IMPORT_QUEUE = "product-import-tasks"
CATALOG_DOWN = "UnhandledError"


def import_row(session: str, step: int, *, rows: int = 10) -> TaskMessage:
    return import_message(
        f"job-{session}",
        step,
        is_last=step == rows,
        row={"sku": f"SKU-{step}", "name": f"Product {step}", "price": "9.50", "currency": "EUR"},
    )


def failed_import(
    dlq: InMemoryDeadLetterQueue, session: str, bad_rows: tuple[int, ...], *, rows: int = 10
) -> None:
    """An import session of ``rows`` rows whose ``bad_rows`` were dead-lettered (the catalog
    was down for them) while the others were imported: ContinueOnFailure."""
    for step in bad_rows:
        message = import_row(session, step, rows=rows)
        dlq.add(
            dead_letter(
                message,
                CATALOG_DOWN,
                queue=IMPORT_QUEUE,
                session_id=session,
                description="Gave up after 5 attempts. Last error: ConnectionError",
                delivery_count=5,
            )
        )


class FlakyCatalog(InMemoryProductCatalog):
    """Down for the first upsert of each SKU in ``flaky``, then back."""

    def __init__(self, flaky: set[str]) -> None:
        super().__init__()
        self.flaky = set(flaky)

    def upsert(self, product: Product) -> None:
        if product.sku in self.flaky:
            self.flaky.remove(product.sku)
            raise ConnectionError("catalog unreachable")
        super().upsert(product)


def run_import_session(
    processor: SessionProcessor,
    actions: InMemorySessionActions,
    messages: Sequence[OutgoingMessage],
) -> list[Outcome]:
    """Deliver the messages in order as Service Bus does: an abandoned one comes again."""
    outcomes: list[Outcome] = []
    for message in messages:
        while True:  # no delivery count: the processor counts the attempts itself
            incoming = IncomingMessage(
                body=message.body,
                session_id="replayed",
                application_properties=message.application_properties,
            )
            outcome = processor.handle(incoming, actions).outcome
            outcomes.append(outcome)
            if outcome is not Outcome.ABANDONED:
                break
    return outcomes


def import_processor(catalog: InMemoryProductCatalog) -> SessionProcessor:
    """An import's processor that hands a failed row back at once (it may not hold its
    session for the backoff), so that the row comes again as a redelivery."""
    time = FakeTime(datetime(2026, 11, 27, tzinfo=UTC))
    return SessionProcessor(
        pipeline=PRODUCT_IMPORT,
        tasks=import_tasks(catalog),
        policy=FailurePolicy.CONTINUE_ON_FAILURE,
        retry=RetryPolicy(window=60, min_backoff=1, max_backoff=1),
        sleep=time.sleep,
        clock=time.now,
        monotonic=time.monotonic,
        hold_seconds=0.5,
    )


def test_an_import_session_is_replayed_without_force_its_last_row_closing_the_session(
    world,
) -> None:
    dlq, archive = world
    failed_import(dlq, "imp-1", (3, 7))
    archive_dead_letters(dlq, archive, queues=[IMPORT_QUEUE])
    assert not archive.get_summary("imp-1").has_last  # row 10 was imported
    resender, seeder = InMemoryResender(), InMemorySessionSeeder()

    result = replay_session(archive, resender, seeder, "imp-1", "key-1", pipelines=PIPELINES)

    new_session = replay_session_id("imp-1", "key-1")
    assert (result.sent, result.new_session_id) == (2, new_session)
    assert [(q, s) for q, s, _ in resender.sent] == [(IMPORT_QUEUE, new_session)] * 2
    third, seventh = (m for _, _, m in resender.sent)
    assert third.body == import_row("imp-1", 3).to_json()  # as it was
    # The last one sent closes the new session; nothing else about it changes.
    assert parse_task_message(seventh.body) == replace(import_row("imp-1", 7), is_last=True)
    assert (third.application_properties["is_last"], seventh.application_properties["is_last"]) == (
        False,
        True,
    )
    assert archive.get_summary("imp-1").status == "replayed"

    # The catalog is back (flaky once on row 7): both rows are imported, the state is gone.
    catalog = FlakyCatalog({"SKU-7"})
    actions = InMemorySessionActions(state=seeder.states.get((IMPORT_QUEUE, new_session)))
    outcomes = run_import_session(import_processor(catalog), actions, [third, seventh])

    assert outcomes == [Outcome.COMPLETED, Outcome.ABANDONED, Outcome.COMPLETED]
    assert sorted(catalog.products) == ["SKU-3", "SKU-7"]
    assert actions.state is None


def test_a_replayed_import_session_of_one_row_runs_that_row_even_when_it_is_retried(
    world,
) -> None:
    dlq, archive = world
    failed_import(dlq, "imp-1", (4,))
    archive_dead_letters(dlq, archive, queues=[IMPORT_QUEUE])
    resender, seeder = InMemoryResender(), InMemorySessionSeeder()
    replay_session(archive, resender, seeder, "imp-1", "key-1", pipelines=PIPELINES)
    [(_, new_session, only)] = resender.sent
    catalog = FlakyCatalog({"SKU-4"})

    # Seeded, so a retried is_last row is not taken for one whose state it already cleared.
    actions = InMemorySessionActions(state=seeder.states.get((IMPORT_QUEUE, new_session)))
    outcomes = run_import_session(import_processor(catalog), actions, [only])

    assert outcomes == [Outcome.ABANDONED, Outcome.COMPLETED]
    assert list(catalog.products) == ["SKU-4"] and actions.state is None


def test_an_unreadable_import_row_is_known_by_its_properties_and_closes_the_session(
    world,
) -> None:
    dlq, archive = world
    message = import_row("imp-1", 5)
    dlq.add(
        dead_letter(
            message,
            "MalformedMessage",
            queue=IMPORT_QUEUE,
            session_id="imp-1",
            description="The message cannot be read",
            body=b"{not json",
        )
    )
    archive_dead_letters(dlq, archive, queues=[IMPORT_QUEUE])
    resender = InMemoryResender()

    replay_session(
        archive, resender, InMemorySessionSeeder(), "imp-1", "key-1", pipelines=PIPELINES
    )

    [(_, _, sent)] = resender.sent
    assert sent.body == b"{not json"  # as it was: the processor reads is_last from properties
    assert (sent.application_properties["pipeline"], sent.application_properties["is_last"]) == (
        PRODUCT_IMPORT,
        True,
    )


def test_a_purchase_still_waits_for_its_last_message_and_is_sent_as_it_was(world) -> None:
    archive = archived(world, upto=4)
    resender = InMemoryResender()
    with pytest.raises(ReplayIncomplete):
        replay_session(archive, resender, InMemorySessionSeeder(), "s-1", "k", pipelines=PIPELINES)

    replay_session(
        archive, resender, InMemorySessionSeeder(), "s-1", "k", force=True, pipelines=PIPELINES
    )

    assert [m.body for _, _, m in resender.sent] == [r.body for r in archive.list_session("s-1")]
    assert not any(parse_task_message(m.body).is_last for _, _, m in resender.sent)


def test_bulk_replay_by_reason_replays_import_sessions(world) -> None:
    dlq, archive = world
    failed_import(dlq, "imp-1", (3, 7))
    failed_import(dlq, "imp-2", (10,))
    dlq.add(*failed_purchase("pay-0", reason=CATALOG_DOWN, upto=4))  # incomplete: waits
    archive_dead_letters(dlq, archive, queues=[IMPORT_QUEUE, "purchase-tasks"])
    requests = InMemoryReplayRequests()
    request = request_bulk_replay(requests, requests, Selection(reason=CATALOG_DOWN))
    resender = InMemoryResender()

    done = run_bulk_replay(
        requests,
        archive,
        resender,
        InMemorySessionSeeder(),
        request.request_id,
        audit=InMemoryAuditTrail(),
        pipelines=PIPELINES,
    )

    assert (done.found, done.sent, done.failed) == (3, 2, 1)
    assert [e["session_id"] for e in done.errors] == ["pay-0"]
    key = f"bulk:{request.request_id}"
    assert [(s, parse_task_message(m.body).step) for _, s, m in resender.sent] == [
        (replay_session_id("imp-1", key), 3),
        (replay_session_id("imp-1", key), 7),
        (replay_session_id("imp-2", key), 10),
    ]


# -- a bulk replay run again after its queue message is redelivered ---------------------------


class Died(Exception):
    pass


class DiesOnce:
    """Wraps a port: the ``nth`` call of ``method`` raises, as a worker that dies there."""

    def __init__(self, port: Any, method: str, nth: int) -> None:
        self._port, self._method, self._left = port, method, nth

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._port, name)
        if name != self._method:
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            self._left -= 1
            if self._left == 0:
                raise Died(f"died in {name}")
            return attribute(*args, **kwargs)

        return call


def bulk_world(world) -> tuple[InMemoryDeadLetterArchive, InMemoryReplayRequests, str]:
    dlq, archive = world
    for n in range(5):
        dlq.add(*failed_purchase(f"pay-{n}"))
    dlq.add(*failed_purchase("pay-incomplete-a", upto=4))
    dlq.add(*failed_purchase("pay-incomplete-b", upto=4))
    failed_import(dlq, "imp-0", (3, 7))
    archive_dead_letters(dlq, archive, queues=["purchase-tasks", IMPORT_QUEUE])
    requests = InMemoryReplayRequests()
    request = request_bulk_replay(
        requests, requests, Selection(reason="PaymentProviderUnavailable")
    )
    return archive, requests, request.request_id


def summary_of(request: ReplayRequest) -> tuple[str, int, int, int, list[str]]:
    return (
        request.status,
        request.found,
        request.sent,
        request.failed,
        sorted(e["session_id"] for e in request.errors),
    )


@pytest.mark.parametrize(
    "dies_in",
    [
        ("save", 4),  # the status save after the last page: every session was replayed
        ("save", 3),  # the progress save of the second page
        ("resend", 5),  # half-way through the second page, before its progress was saved
        ("mark_replayed", 2),  # after sending the second session, before marking it
        ("save_summary", 3),  # after marking the third, before its summary said replayed
    ],
)
def test_a_bulk_replay_run_again_reports_the_totals_of_one_run(world, dies_in) -> None:
    once = bulk_world(world)
    clean = run_bulk_replay(
        once[1],
        once[0],
        InMemoryResender(),
        InMemorySessionSeeder(),
        once[2],
        page_size=3,
        audit=InMemoryAuditTrail(),
        pipelines=PIPELINES,
    )
    assert summary_of(clean) == (
        "completed",
        7,
        5,
        2,
        ["pay-incomplete-a", "pay-incomplete-b"],
    )

    archive, requests, request_id = bulk_world(
        (InMemoryDeadLetterQueue(), InMemoryDeadLetterArchive())
    )
    method, nth = dies_in
    seen: set[str] = set()
    ports: dict[str, Any] = {
        "store": requests,
        "archive": archive,
        "resender": InMemoryResender(seen_ids=seen),
    }
    port = {"save": "store", "resend": "resender"}.get(method, "archive")
    ports[port] = DiesOnce(ports[port], method, nth)
    with pytest.raises(Died):
        run_bulk_replay(
            ports["store"],
            ports["archive"],
            ports["resender"],
            InMemorySessionSeeder(),
            request_id,
            page_size=3,
            audit=InMemoryAuditTrail(),
            pipelines=PIPELINES,
        )
    assert requests.get(request_id).status == "running"
    again = InMemoryResender(seen_ids=seen)  # the queue's duplicate detection

    rerun = run_bulk_replay(
        requests,
        archive,
        again,
        InMemorySessionSeeder(),
        request_id,
        page_size=3,
        audit=InMemoryAuditTrail(),
        pipelines=PIPELINES,
    )

    assert summary_of(rerun) == summary_of(clean)
    replayed = sorted(sid for sid, s in archive.summaries.items() if s.status == "replayed")
    assert replayed == [f"pay-{n}" for n in range(5)]
    assert len(seen) == 5 * 3  # each message of each session sent once


def test_a_row_service_bus_dead_lettered_itself_counts_as_failed_in_its_jobs_progress(
    world,
) -> None:
    dlq, archive = world
    progress = InMemoryImportProgress()
    broker = import_row("imp-9", 4)  # never settled by the processor: the broker gave up
    app = import_row("imp-9", 5)  # dead-lettered by the processor, which told progress then
    progress.record("job-imp-9", "imp-9", 5, status="failed", reason="InvalidProduct:price")
    dlq.add(
        dead_letter(broker, "MaxDeliveryCountExceeded", queue=IMPORT_QUEUE, session_id="imp-9"),
        dead_letter(app, "InvalidProduct:price", queue=IMPORT_QUEUE, session_id="imp-9"),
    )
    told: list[tuple[int | None, str | None]] = []
    observer = import_progress_observer(progress)

    def observe(incoming, message, outcome, reason) -> None:
        told.append((message.step if message else None, reason))
        observer(incoming, message, outcome, reason)

    archive_dead_letters(dlq, archive, queues=[IMPORT_QUEUE], observers={IMPORT_QUEUE: observe})

    assert told == [(4, "MaxDeliveryCountExceeded")]  # the app's own dead letter not again
    assert progress.counts("job-imp-9") == {"failed": 2}
