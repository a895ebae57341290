"""A batch of one session's messages (``SessionProcessor.handle_batch``), as the batch session
trigger hands them over: each message decided, told and settled as ``handle`` would (the rows
of docs/processor.md unchanged), the good rows' items written together, the state read once
and written once per run of good rows. The rows are the import's: ImportProduct under
ContinueOnFailure, its batch form writing products through ``upsert_many``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from shared.domain.envelope import TaskMessage
from shared.domain.errors import TransientTaskError
from shared.domain.pipelines import IMPORT_PRODUCT, PRODUCT_IMPORT, FailurePolicy
from shared.domain.products import Product
from shared.service_layer.observers import import_progress_observer
from shared.service_layer.processor import (
    IncomingMessage,
    Outcome,
    Result,
    RetryPolicy,
    SessionProcessor,
)
from shared.service_layer.product_import_tasks import import_batch_tasks, import_tasks
from tests.fakes import (
    FakeTime,
    InMemoryImportProgress,
    InMemoryProductCatalog,
    InMemorySessionActions,
    InMemorySessionOutcomes,
)

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
JOB = "import-1"
SESSION = "import-1-s1"


class CountingCatalog(InMemoryProductCatalog):
    """Records each write: ``upsert`` one product, ``upsert_many`` a batch; ``fail_many``
    makes every batch write raise (the table unreachable for transactions)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[list[str]] = []
        self.fail_many = False
        self.fail_one: dict[str, int] = {}  # SKU -> how many more of its upserts fail

    def upsert(self, product: Product) -> None:
        if self.fail_one.get(product.sku, 0) > 0:
            self.fail_one[product.sku] -= 1
            raise TransientTaskError("CatalogUnavailable", "the catalog table cannot be reached")
        self.writes.append([product.sku])
        super().upsert(product)

    def upsert_many(self, products: Sequence[Product]) -> None:
        if self.fail_many:
            raise ConnectionError("the catalog table cannot be reached")
        self.writes.append([product.sku for product in products])
        for product in products:
            super().upsert(product)


class CountingProgress(InMemoryImportProgress):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def record(self, *args: Any, **kwargs: Any) -> None:
        self.calls += 1
        super().record(*args, **kwargs)

    def record_many(self, rows: Sequence[Any]) -> None:
        self.calls += 1
        for row in rows:
            super().record(
                row.job_id, row.session_id, row.step, status=row.status, reason=row.reason
            )

    def record_run(self, job_id: str, session_id: str, first_step: int, last_step: int) -> None:
        self.calls += 1
        super().record_run(job_id, session_id, first_step, last_step)


class CountingActions(InMemorySessionActions):
    reads: int = 0

    def get_state(self) -> bytes | None:
        self.reads += 1
        return super().get_state()


class Import:
    def __init__(
        self, *, batched: bool = True, hold_seconds: float = 300.0, window: float = 3.0
    ) -> None:
        self.catalog = CountingCatalog()
        self.progress = CountingProgress()
        self.outcomes = InMemorySessionOutcomes()
        self.time = FakeTime(NOW)
        self.processor = SessionProcessor(
            pipeline=PRODUCT_IMPORT,
            tasks=import_tasks(self.catalog),
            policy=FailurePolicy.CONTINUE_ON_FAILURE,
            retry=RetryPolicy(window=window, min_backoff=0.5, max_backoff=1.5),
            sleep=self.time.sleep,
            clock=self.time.now,
            monotonic=self.time.monotonic,
            observer=import_progress_observer(self.progress),
            outcomes=self.outcomes,
            batch_tasks=import_batch_tasks(self.catalog) if batched else None,
            hold_seconds=hold_seconds,
        )
        self.actions = CountingActions()

    def batch(self, *messages: IncomingMessage) -> list[Result]:
        return self.processor.handle_batch([(m, self.actions) for m in messages])


def row(step: int, *, last: int = 5, price: str = "9.50") -> IncomingMessage:
    message = TaskMessage(
        JOB,
        PRODUCT_IMPORT,
        IMPORT_PRODUCT,
        step,
        step == last,
        {"sku": f"SKU-{step}", "name": f"Product {step}", "price": price, "currency": "EUR"},
    )
    return IncomingMessage(
        body=message.to_json(),
        session_id=SESSION,
        message_id=f"{JOB}:{step}",
        application_properties=message.application_properties(),
    )


def test_a_batch_of_good_rows_is_written_once_its_state_once_and_each_row_completed() -> None:
    imp = Import()

    results = imp.batch(*(row(step) for step in range(1, 6)))

    assert [r.outcome for r in results] == [Outcome.COMPLETED] * 5
    assert imp.catalog.writes == [[f"SKU-{step}" for step in range(1, 6)]]
    assert imp.actions.reads == 1
    # The batch's state written once, before the completions; then the last message's clear.
    assert imp.actions.events == ["set_state", *["complete"] * 5, "set_state", "release_session"]
    assert imp.actions.state is None
    assert imp.progress.calls == 1
    assert imp.progress.runs == {(JOB, SESSION, 1): 5}  # one record for the batch's rows
    assert imp.progress.counts(JOB) == {"imported": 5}
    [outcome] = imp.outcomes.outcomes.values()
    assert outcome.status == "completed"


def test_a_bad_row_is_dead_lettered_with_its_field_and_the_rows_around_it_are_imported() -> None:
    imp = Import()

    results = imp.batch(row(1), row(2), row(3, price="-1"), row(4), row(5))

    assert [r.outcome for r in results] == [
        Outcome.COMPLETED,
        Outcome.COMPLETED,
        Outcome.DEAD_LETTERED,
        Outcome.COMPLETED,
        Outcome.COMPLETED,
    ]
    assert results[2].reason == "InvalidProduct:price"
    assert [s[0] for s in imp.actions.settlements] == [
        "complete",
        "complete",
        "dead_letter",
        "complete",
        "complete",
    ]
    # The good rows before the bad one, then the ones after it: two writes.
    assert imp.catalog.writes == [["SKU-1", "SKU-2"], ["SKU-4", "SKU-5"]]
    # Every state is written before the settlement it goes with.
    assert imp.actions.events == [
        "set_state",
        "complete",
        "complete",
        "set_state",
        "dead_letter",
        "set_state",
        "complete",
        "complete",
        "set_state",
        "release_session",
    ]
    assert imp.progress.counts(JOB) == {"imported": 4, "failed": 1}
    [outcome] = imp.outcomes.outcomes.values()
    assert (outcome.status, outcome.reason) == ("failed", "InvalidProduct:price")


def test_a_batch_ends_as_the_same_rows_one_at_a_time_end() -> None:
    bodies = [row(1), row(2, price="x"), row(3), row(1), row(4), row(5)]  # row 1 redelivered
    batched, one_by_one = Import(), Import(batched=False)

    batch_results = batched.batch(*bodies)
    single_results = [one_by_one.processor.handle(body, one_by_one.actions) for body in bodies]

    assert [(r.outcome, r.reason) for r in batch_results] == [
        (r.outcome, r.reason) for r in single_results
    ]
    assert batched.actions.settlements == one_by_one.actions.settlements
    assert batched.catalog.products == one_by_one.catalog.products
    assert batched.progress.statuses() == one_by_one.progress.statuses()
    assert batched.outcomes.outcomes == one_by_one.outcomes.outcomes


def test_rows_already_done_are_completed_without_running_after_a_crash_past_the_state_write() -> (
    None
):
    imp = Import()
    imp.batch(row(1), row(2))  # state next_step 3 written, then (say) the worker died
    imp.catalog.writes.clear()

    results = imp.batch(row(1), row(2), row(3))

    assert [r.outcome for r in results] == [
        Outcome.ALREADY_DONE,
        Outcome.ALREADY_DONE,
        Outcome.COMPLETED,
    ]
    assert imp.catalog.writes == [["SKU-3"]]


def test_a_batch_write_that_fails_runs_the_rows_one_by_one() -> None:
    imp = Import()
    imp.catalog.fail_many = True

    results = imp.batch(row(1), row(2), row(3))

    assert [r.outcome for r in results] == [Outcome.COMPLETED] * 3
    assert imp.catalog.writes == [["SKU-1"], ["SKU-2"], ["SKU-3"]]
    assert json.loads(imp.actions.state or b"")["next_step"] == 4
    assert imp.progress.counts(JOB) == {"imported": 3}


def test_a_row_to_retry_is_waited_out_and_the_rows_behind_it_run_after_it() -> None:
    imp = Import()
    imp.catalog.fail_many = True
    imp.catalog.fail_one = {"SKU-2": 2}

    results = imp.batch(row(1), row(2), row(3), row(4))

    assert [r.outcome for r in results] == [Outcome.COMPLETED] * 4
    assert "abandon" not in imp.actions.events  # nothing behind the retried row handed back
    assert imp.catalog.writes == [["SKU-1"], ["SKU-2"], ["SKU-3"], ["SKU-4"]]  # in order
    assert json.loads(imp.actions.state or b"")["next_step"] == 5
    assert imp.progress.counts(JOB) == {"imported": 4}


def test_a_row_still_failing_when_the_hold_ends_is_handed_back_with_the_rows_behind_it() -> None:
    imp = Import(hold_seconds=2.0, window=60.0)
    imp.catalog.fail_many = True
    imp.catalog.fail_one = {"SKU-2": 1000}

    results = imp.batch(row(1), row(2), row(3), row(4))

    assert [(r.outcome, r.reason) for r in results] == [
        (Outcome.COMPLETED, None),
        (Outcome.ABANDONED, "CatalogUnavailable"),
        (Outcome.ABANDONED, "EarlierMessageHandedBack"),
        (Outcome.ABANDONED, "EarlierMessageHandedBack"),
    ]
    assert imp.catalog.writes == [["SKU-1"]]
    state = json.loads(imp.actions.state or b"")
    assert state["next_step"] == 2
    assert state["attempts"]["failed"] >= 2 and state["attempts_since"] == NOW.isoformat()

    imp.catalog.fail_many = False
    imp.catalog.fail_one = {}
    again = imp.batch(row(2), row(3), row(4))

    assert [r.outcome for r in again] == [Outcome.COMPLETED] * 3
    assert imp.catalog.writes[-1] == ["SKU-2", "SKU-3", "SKU-4"]


def test_rows_left_to_the_trigger_are_not_completed_but_their_state_is_written() -> None:
    imp = Import()

    results = imp.processor.handle_batch(
        [(m, imp.actions) for m in (row(1), row(2), row(3))], completed_by_trigger=True
    )

    assert [r.outcome for r in results] == [Outcome.COMPLETED] * 3
    assert imp.actions.events == ["set_state"]  # the host completes them after the invocation
    assert json.loads(imp.actions.state or b"{}")["next_step"] == 4
    assert imp.progress.counts(JOB) == {"imported": 3}


def test_rows_left_to_the_trigger_are_completed_before_the_last_row_clears_the_state() -> None:
    imp = Import()
    imp.processor.handle_batch([(row(1), imp.actions)], completed_by_trigger=True)

    imp.processor.handle_batch(
        [(m, imp.actions) for m in (row(2), row(3, last=4, price="-1"), row(4, last=4))],
        completed_by_trigger=True,
    )

    # Row 2 is left to the trigger, then completed here after all, before row 4 ends the
    # session: a crash after the clear could otherwise bring it back to an empty state.
    assert imp.actions.events[1:] == [
        "set_state",  # row 2, left
        "set_state",  # row 3, bad
        "dead_letter",
        "set_state",  # row 4, the last
        "complete",  # row 2
        "complete",  # row 4
        "set_state",  # cleared
        "release_session",
    ]
    assert imp.actions.state is None
