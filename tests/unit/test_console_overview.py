"""The console's front page: orders in flight and completed, import jobs still running, failed,
replayed and resolved sessions, and dead letters not archived yet."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime

from shared.domain.archive import RESOLVE, FailedSession, GroupKey, ReplayClaim
from shared.domain.errors import ServiceUnavailable
from shared.domain.import_jobs import JobManifest
from shared.domain.order_status import OrderRecord, StepOutcome
from shared.domain.pauses import ManualPause
from shared.domain.pipelines import PURCHASE, PURCHASE_TASKS
from shared.domain.session_outcomes import COMPLETED, FAILED, SessionOutcome
from shared.service_layer.circuits import Circuit, Gates, PipelineGate
from shared.service_layer.overview import WAITING_COUNT_MAX, Sources, overview
from tests.fakes import (
    FakeTime,
    InMemoryDeadLetterArchive,
    InMemoryDeadLetterCounter,
    InMemoryImportManifests,
    InMemoryImportProgress,
    InMemoryOrderProgress,
    InMemoryPipelinePauses,
    InMemorySessionOutcomes,
)


def _session(session_id: str, reason: str) -> FailedSession:
    return FailedSession(
        session_id, "purchase-tasks", "ProcessPayment", 3, reason, "d", None, 3, True, {}
    )


def _steps(progress: InMemoryOrderProgress, job_id: str, done: int, failed: bool) -> None:
    progress.accept(job_id, job_id, "t")
    for step in range(1, done + 1):
        progress.record(
            job_id, StepOutcome(step, PURCHASE_TASKS[step - 1], "completed", None, job_id, "t")
        )
    if failed:
        step = done + 1
        progress.record(
            job_id, StepOutcome(step, PURCHASE_TASKS[step - 1], "failed", "Declined", job_id, "t")
        )


def test_the_overview_counts_orders_imports_groups_and_what_waits_for_the_archive() -> None:
    archive = InMemoryDeadLetterArchive()
    archive.save_summary(_session("a", "PaymentDeclined"))
    archive.save_summary(_session("b", "PaymentProviderUnavailable"))
    archive.save_summary(_session("c", "PaymentProviderUnavailable"))
    archive.save_summary(replace(_session("d", "PaymentDeclined"), status="replayed"))
    archive.save_summary(_session("e", "PaymentDeclined"))
    archive.claim_replay("e", ReplayClaim("k", "", "t", action=RESOLVE))
    counter = InMemoryDeadLetterCounter({"purchase-tasks": 4, "imports": 5000})
    orders, sessions = InMemoryOrderProgress(), InMemorySessionOutcomes()
    for job in ("accepted", "done", "declined", "replayed"):
        orders.accept(job, job, "t")
    sessions.record(SessionOutcome("done", "done", PURCHASE, COMPLETED, "t1"))
    sessions.record(SessionOutcome("declined", "declined", PURCHASE, FAILED, "t1", "Declined"))
    sessions.record(SessionOutcome("replayed", "replayed", PURCHASE, FAILED, "t1", "Declined"))
    sessions.record(SessionOutcome("replayed", "replay-1", PURCHASE, COMPLETED, "t2"))
    _steps(orders, "running", 2, failed=False)  # an earlier release's, by its step rows
    manifests, imports = InMemoryImportManifests(), InMemoryImportProgress()
    manifests.save(JobManifest("busy", "imports", 3, 0, 3, {"s": 3}))
    manifests.save(JobManifest("over", "imports", 1, 0, 1, {"t": 1}))
    imports.record("busy", "s", 1, status="imported", reason=None)
    imports.record("over", "t", 1, status="failed", reason="bad")

    now = overview(
        Sources(archive, counter, orders, manifests, imports, sessions=sessions),
        ["purchase-tasks", "imports"],
        pipelines={"purchase": "purchase-tasks", "product_import": "imports"},
    )

    assert now.orders is not None and now.imports is not None
    assert (now.orders.in_flight, now.orders.completed, now.orders.failed) == (2, 2, 1)
    assert [(job.job_id, job.rows_imported, job.rows_pending) for job in now.imports] == [
        ("busy", 1, 2)
    ]
    assert (now.failed, now.replayed, now.resolved) == (3, 1, 1)
    assert [(g.reason, g.sessions) for g in now.groups] == [
        ("PaymentProviderUnavailable", 2),
        ("PaymentDeclined", 1),
    ]
    assert now.waiting == {"purchase-tasks": 4, "imports": WAITING_COUNT_MAX}
    assert [(p.pipeline, p.queue, p.failed, p.waiting) for p in now.pipelines] == [
        ("purchase", "purchase-tasks", 3, 4),
        ("product_import", "imports", 0, WAITING_COUNT_MAX),
    ]


class OutOfReach(InMemoryOrderProgress):
    def records(self, *, up_to: int) -> list[OrderRecord]:
        raise ServiceUnavailable("Table Storage", "ServiceRequestError")


class ArchiveOutOfReach(InMemoryDeadLetterArchive):
    def count_sessions(self) -> Counter[GroupKey]:
        raise ServiceUnavailable("Table Storage", "ServiceRequestError")


def test_in_an_outage_the_overview_says_what_it_cannot_read_and_which_pipelines_are_paused() -> (
    None
):
    time = FakeTime(datetime(2026, 11, 27, 12, 3, 10, tzinfo=UTC))
    circuit = Circuit("purchase", threshold=2, clock=time.now, monotonic=time.monotonic)
    pauses = InMemoryPipelinePauses()
    pauses.pause(
        "product_import",
        ManualPause("ada@example.com", "reindexing", "2026-11-27T12:03:10.250000+00:00"),
    )
    gates = Gates(
        [
            PipelineGate(circuit, pauses, monotonic=time.monotonic),
            PipelineGate(
                Circuit("product_import", monotonic=time.monotonic),
                pauses,
                monotonic=time.monotonic,
            ),
        ]
    )
    circuit.failed("s-1", "Table Storage")
    circuit.failed("s-2", "Table Storage")
    counter = InMemoryDeadLetterCounter({"purchase-tasks": 0})

    now = overview(
        Sources(
            ArchiveOutOfReach(),
            counter,
            OutOfReach(),
            InMemoryImportManifests(),
            InMemoryImportProgress(),
        ),
        ["purchase-tasks"],
        pipelines={"purchase": "purchase-tasks", "product_import": "imports"},
        gates=gates,
    )

    assert now.unavailable == ("Table Storage",)
    assert (now.orders, now.failed, now.replayed) == (None, None, None)
    assert now.imports == []  # read: the manifests answered
    purchase, product_import = now.pipelines
    assert (purchase.failed, purchase.waiting) == (None, 0)
    assert purchase.paused is not None
    assert purchase.paused.summary == ("Table Storage unreachable since 2026-11-27T12:03:10+00:00")
    assert product_import.paused is not None
    assert (
        product_import.paused.summary
        == "paused by ada@example.com since 2026-11-27T12:03:10+00:00: reindexing"
    )
