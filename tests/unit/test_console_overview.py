"""The console's front page: orders in flight and completed, import jobs still running, failed,
replayed and resolved sessions, and dead letters not archived yet."""

from __future__ import annotations

from dataclasses import replace

from shared.domain.archive import RESOLVE, FailedSession, ReplayClaim
from shared.domain.import_jobs import JobManifest
from shared.domain.order_status import StepOutcome
from shared.domain.pipelines import PURCHASE_TASKS
from shared.service_layer.overview import WAITING_COUNT_MAX, Sources, overview
from tests.fakes import (
    InMemoryDeadLetterArchive,
    InMemoryDeadLetterCounter,
    InMemoryImportManifests,
    InMemoryImportProgress,
    InMemoryOrderProgress,
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
    orders = InMemoryOrderProgress()
    orders.accept("accepted", "accepted", "t")
    _steps(orders, "running", 2, failed=False)
    _steps(orders, "done", len(PURCHASE_TASKS), failed=False)
    _steps(orders, "declined", 2, failed=True)
    manifests, imports = InMemoryImportManifests(), InMemoryImportProgress()
    manifests.save(JobManifest("busy", "imports", 3, 0, 3, {"s": 3}))
    manifests.save(JobManifest("over", "imports", 1, 0, 1, {"t": 1}))
    imports.record("busy", "s", 1, status="imported", reason=None)
    imports.record("over", "t", 1, status="failed", reason="bad")

    now = overview(
        Sources(archive, counter, orders, manifests, imports),
        ["purchase-tasks", "imports"],
        pipelines={"purchase": "purchase-tasks", "product_import": "imports"},
    )

    assert (now.orders.in_flight, now.orders.completed, now.orders.failed) == (2, 1, 1)
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
