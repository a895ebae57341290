"""The purge: what outlived its lifetime goes (``shared.domain.retention``), in batches, within a
time budget, never what a replay or a running job still needs.

One run, in this order: the failed sessions nobody acted on are read first (``still_needed``:
they, their jobs and their order numbers are kept whatever their age), then each kind of record
is purged with the cutoff its lifetime gives (a lifetime of 0 keeps that kind for good). A run
that reaches its budget stops between two batches and says so; the next run goes on where the
records still are, since nothing is purged that is not expired, and each kind deletes its
dependent rows before the row it finds them by (a session's messages and blobs before its
summary, an order's charge and receipt before its progress), so a run cut short leaves nothing
unreachable behind.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime

from ..domain.archive import FAILED, REPLAYED, RESOLVED, SummaryFilter
from ..domain.retention import Keep, Lifetimes, PurgeReport
from ..telemetry.operations import operation_span
from .failed_sessions import every_session
from .operator_ports import Purged, RetentionStore
from .ports import DeadLetterArchive


def still_needed(archive: DeadLetterArchive) -> Keep:
    """The failed sessions nobody replayed or resolved yet, their jobs and their order numbers
    (a replay of a purchase that failed after its receipt was made sends it again)."""
    sessions: set[str] = set()
    jobs: set[str] = set()
    numbers: set[str] = set()
    for summary in every_session(archive, SummaryFilter(status=FAILED)):
        sessions.add(summary.session_id)
        job = summary.job_id or next(
            (r.job_id for r in archive.list_session(summary.session_id, bodies=False) if r.job_id),
            None,
        )
        if job:
            jobs.add(job)
        if number := summary.context.get("order_number"):
            numbers.add(str(number))
    return Keep(frozenset(sessions), frozenset(jobs), frozenset(numbers))


def purge_expired(
    store: RetentionStore,
    archive: DeadLetterArchive,
    lifetimes: Lifetimes,
    *,
    now: datetime,
    max_seconds: float,
    monotonic: Callable[[], float] = time.monotonic,
) -> PurgeReport:
    """Purge every kind of record past its lifetime at ``now``; stop once ``max_seconds`` have
    passed (``PurgeReport.stopped_early``)."""
    until = monotonic() + max_seconds
    deleted: dict[str, int] = {}
    with operation_span("purge expired records") as note:
        keep = still_needed(archive)
        kinds: list[tuple[str, Callable[[str], Purged]]] = [
            ("idempotency_keys", lambda before: store.purge_idempotency_keys(before, until)),
            ("confirmations", lambda before: store.purge_confirmations(before, until)),
            ("replay_requests", lambda before: store.purge_replay_requests(before, until)),
            (
                "replayed_sessions",
                lambda before: store.purge_sessions(REPLAYED, before, keep, until),
            ),
            (
                "resolved_sessions",
                lambda before: store.purge_sessions(RESOLVED, before, keep, until),
            ),
            ("jobs", lambda before: store.purge_jobs(before, keep, until)),
            ("audit", lambda before: store.purge_audit(before, until)),
        ]
        finished = True
        for name, purge in kinds:
            before = lifetimes.cutoff(name, now)
            if before is None:
                continue
            if monotonic() >= until:
                finished = False
                break
            purged = purge(before)
            for where, count in purged.deleted.items():
                deleted[where] = deleted.get(where, 0) + count
            if not purged.finished:
                finished = False
                break
        report = PurgeReport({k: v for k, v in deleted.items() if v}, stopped_early=not finished)
        note(**{"purge.deleted": report.total, "purge.stopped_early": report.stopped_early})
    return report
