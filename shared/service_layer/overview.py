"""The console's front page in one read: orders in flight and completed, import jobs still
running, failed sessions by group, how many were replayed or resolved, each declared pipeline
with its queue, its failed sessions and its dead letters still waiting for the archive timer,
and the alert conditions that hold now (``alerts``)."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import timedelta

from ..domain.alerts import Alert, AlertRules
from ..domain.archive import FAILED, REPLAYED, RESOLVED
from ..domain.import_jobs import ImportJobStatus, import_job_status
from ..domain.order_status import OrderRecord, order_status
from ..domain.pipelines import PURCHASE_TASKS
from ..domain.retention import iso
from .alerts import ARCHIVE_TIMER, current_alerts
from .clock import utc_now
from .failed_sessions import FailureGroup, group_by_status
from .operator_ports import DeadLetterCounter, TimerRuns
from .ports import DeadLetterArchive, ImportManifests, ImportProgress, OrderProgress

WAITING_COUNT_MAX = 1000  # past this the page says "1000+": counting costs a peek per 250
ORDERS_COUNTED_MAX = 2000  # orders read per overview; past this the counts say "2000+"
IMPORT_JOBS_READ_MAX = 200  # import manifests read per overview


@dataclass(frozen=True)
class Orders:
    in_flight: int  # accepted or running
    completed: int
    failed: int
    counted: int  # orders read: ORDERS_COUNTED_MAX when there may be more


@dataclass(frozen=True)
class PipelineCounts:
    pipeline: str
    queue: str
    failed: int  # failed sessions not replayed or resolved
    waiting: int  # dead letters not archived yet (at most WAITING_COUNT_MAX)


@dataclass(frozen=True)
class Overview:
    orders: Orders
    imports: list[ImportJobStatus]  # jobs whose rows are not all imported or failed yet
    groups: list[FailureGroup]
    failed: int
    replayed: int
    resolved: int
    waiting: dict[str, int]  # queue -> dead letters not archived yet (at most WAITING_COUNT_MAX)
    pipelines: list[PipelineCounts]  # each declared pipeline, in the registry's order
    alerts: list[Alert] = field(default_factory=list)  # the conditions that hold now


@dataclass(frozen=True)
class Sources:
    """What the overview reads."""

    archive: DeadLetterArchive
    counter: DeadLetterCounter
    orders: OrderProgress
    manifests: ImportManifests
    imports: ImportProgress
    runs: TimerRuns | None = None  # the archive timer's runs, for the alerts
    rules: AlertRules = field(default_factory=AlertRules)


def overview(
    sources: Sources, queues: Sequence[str], *, pipelines: Mapping[str, str] | None = None
) -> Overview:
    """``queues``: the session queues whose waiting dead letters are counted; ``pipelines``:
    each declared pipeline's queue, by the pipeline's name (``Settings.queues``).

    Each source is read once, the reads side by side (each is a round trip or a few to a
    different table or queue), so the page takes as long as its slowest read, not their sum.
    A read that fails fails the overview with its error."""
    declared = dict(pipelines or {})
    counted = list(dict.fromkeys([*queues, *declared.values()]))
    now = utc_now()
    window = timedelta(minutes=sources.rules.failed_sessions_window_minutes)
    with ThreadPoolExecutor(max_workers=5 + len(counted), thread_name_prefix="overview") as pool:
        recent = pool.submit(sources.archive.count_failed_since, iso(now - window))
        archive_run = pool.submit(sources.runs.find, ARCHIVE_TIMER) if sources.runs else None
        orders = pool.submit(count_orders, sources.orders)
        imports = pool.submit(imports_in_progress, sources.manifests, sources.imports)
        by_status = pool.submit(group_by_status, sources.archive)
        waiting_of = {
            q: pool.submit(sources.counter.waiting, q, up_to=WAITING_COUNT_MAX) for q in counted
        }
        groups = by_status.result()
        failed = groups.get(FAILED, [])
        waiting = {q: count.result() for q, count in waiting_of.items()}
        result = Overview(
            orders=orders.result(),
            imports=imports.result(),
            groups=failed,
            failed=_sessions(groups, FAILED),
            replayed=_sessions(groups, REPLAYED),
            resolved=_sessions(groups, RESOLVED),
            waiting={q: waiting[q] for q in queues},
            pipelines=[
                PipelineCounts(
                    pipeline=name,
                    queue=queue,
                    failed=sum(g.sessions for g in failed if g.queue == queue),
                    waiting=waiting[queue],
                )
                for name, queue in declared.items()
            ],
        )
        alerts = current_alerts(
            sources.rules,
            now=now,
            waiting=waiting,
            archive_run=archive_run.result() if archive_run else None,
            failed_recently=recent.result(),
            pipelines=declared,
            paused={c.pipeline: getattr(c, "paused", None) for c in result.pipelines},
        )
        return replace(result, alerts=alerts)


def _sessions(groups: dict[str, list[FailureGroup]], status: str) -> int:
    return sum(g.sessions for g in groups.get(status, []))


def count_orders(progress: OrderProgress) -> Orders:
    """Orders by where they stand, from their recorded steps (``order_status``): a replayed
    order whose replay completed counts as completed."""
    records = progress.records(up_to=ORDERS_COUNTED_MAX)
    statuses = Counter(_status_of(record) for record in records)
    return Orders(
        in_flight=statuses["accepted"] + statuses["running"],
        completed=statuses["completed"],
        failed=statuses["failed"],
        counted=len(records),
    )


@functools.lru_cache(maxsize=2 * ORDERS_COUNTED_MAX)
def _status_of(record: OrderRecord) -> str:
    """Where an order stands from its steps alone. Kept per record: the overview counts the
    same records every few seconds (the console refreshes), and most have not changed."""
    return order_status(
        record, PURCHASE_TASKS, order_number=None, charged=None, failure=None, claim=None
    ).status


def imports_in_progress(
    manifests: ImportManifests, progress: ImportProgress
) -> list[ImportJobStatus]:
    """The import jobs with rows still to import, by job id."""
    jobs = [
        import_job_status(m.job_id, m, progress.counts(m.job_id))
        for m in manifests.list_manifests(up_to=IMPORT_JOBS_READ_MAX)
    ]
    return sorted((job for job in jobs if job.status != "completed"), key=lambda j: j.job_id)
