"""The console's front page in one read: orders in flight and completed, import jobs still
running, failed sessions by group, how many were replayed or resolved, each declared pipeline
with its queue, whether it is paused (and why), its failed sessions and its dead letters still
waiting for the archive timer, and the alert conditions that hold now (``alerts``).

During an outage the overview still answers: what could not be read is None (shown as
unknown) and the service out of reach is named in ``unavailable``; the pauses come from this
process's gates, which need nothing an outage can take away."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import TypeVar

from ..domain.alerts import Alert, AlertRules
from ..domain.archive import FAILED, REPLAYED, RESOLVED
from ..domain.errors import PipelineError
from ..domain.import_jobs import ImportJobStatus, import_job_status
from ..domain.order_status import OrderRecord, order_status
from ..domain.pauses import Paused
from ..domain.pipelines import PURCHASE, PURCHASE_TASKS
from ..domain.retention import iso
from ..domain.session_outcomes import ACCEPTED, SessionOutcome
from .alerts import ARCHIVE_TIMER, current_alerts
from .circuits import Gates
from .clock import utc_now
from .failed_sessions import FailureGroup, group_by_status
from .operator_ports import DeadLetterCounter, TimerRuns
from .ports import (
    DeadLetterArchive,
    ImportManifests,
    ImportProgress,
    OrderProgress,
    SessionOutcomes,
)

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
    failed: int | None  # failed sessions not replayed or resolved
    waiting: int | None  # dead letters not archived yet (at most WAITING_COUNT_MAX)
    paused: Paused | None = None  # why its tasks do not run now


@dataclass(frozen=True)
class Overview:
    """What could not be read (its service named in ``unavailable``) is None, or empty."""

    orders: Orders | None
    imports: list[ImportJobStatus] | None  # jobs whose rows are not all imported or failed yet
    groups: list[FailureGroup]
    failed: int | None
    replayed: int | None
    resolved: int | None
    # queue -> dead letters not archived yet (at most WAITING_COUNT_MAX)
    waiting: dict[str, int | None]
    pipelines: list[PipelineCounts]  # each declared pipeline, in the registry's order
    unavailable: tuple[str, ...] = ()  # the services that could not be read, e.g. Table Storage
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
    sessions: SessionOutcomes | None = None  # how the orders' sessions ended
    rules: AlertRules = field(default_factory=AlertRules)


def overview(
    sources: Sources,
    queues: Sequence[str],
    *,
    pipelines: Mapping[str, str] | None = None,
    gates: Gates | None = None,
) -> Overview:
    """``queues``: the session queues whose waiting dead letters are counted; ``pipelines``:
    each declared pipeline's queue, by the pipeline's name (``Settings.queues``); ``gates``:
    their pauses and circuits in this process.

    Each source is read once, the reads side by side (each is a round trip or a few to a
    different table or queue), so the page takes as long as its slowest read, not their sum.
    A read that fails because its service is out of reach leaves its part unknown (None) and
    names the service; any other error fails the overview."""
    declared = dict(pipelines or {})
    counted = list(dict.fromkeys([*queues, *declared.values()]))
    unavailable: dict[str, None] = {}
    now = utc_now()
    window = timedelta(minutes=sources.rules.failed_sessions_window_minutes)
    with ThreadPoolExecutor(max_workers=5 + len(counted), thread_name_prefix="overview") as pool:
        recent = pool.submit(sources.archive.count_failed_since, iso(now - window))
        archive_run = pool.submit(sources.runs.find, ARCHIVE_TIMER) if sources.runs else None
        orders = pool.submit(count_orders, sources.orders, sources.sessions)
        imports = pool.submit(imports_in_progress, sources.manifests, sources.imports)
        by_status = pool.submit(group_by_status, sources.archive)
        waiting_of = {
            q: pool.submit(sources.counter.waiting, q, up_to=WAITING_COUNT_MAX) for q in counted
        }
        groups = _read(by_status, unavailable)
        failed = groups.get(FAILED, []) if groups is not None else []
        waiting = {q: _read(count, unavailable) for q, count in waiting_of.items()}
        paused = gates.paused() if gates is not None else {}
        result = Overview(
            orders=_read(orders, unavailable),
            imports=_read(imports, unavailable),
            groups=failed,
            failed=_sessions(groups, FAILED),
            replayed=_sessions(groups, REPLAYED),
            resolved=_sessions(groups, RESOLVED),
            waiting={q: waiting[q] for q in queues},
            pipelines=[
                PipelineCounts(
                    pipeline=name,
                    queue=queue,
                    failed=(
                        sum(g.sessions for g in failed if g.queue == queue)
                        if groups is not None
                        else None
                    ),
                    waiting=waiting[queue],
                    paused=paused.get(name),
                )
                for name, queue in declared.items()
            ],
            unavailable=tuple(unavailable),
        )
        alerts = current_alerts(
            sources.rules,
            now=now,
            waiting={q: n for q, n in waiting.items() if n is not None},
            archive_run=_read(archive_run, unavailable) if archive_run else None,
            failed_recently=_read(recent, unavailable) or {},
            pipelines=declared,
            paused={c.pipeline: c.paused for c in result.pipelines},
        )
        return replace(result, alerts=alerts, unavailable=tuple(unavailable))


T = TypeVar("T")


def _read(future: Future[T], unavailable: dict[str, None]) -> T | None:
    """The read's result; None when its service was out of reach (named in
    ``unavailable``)."""
    try:
        return future.result()
    except PipelineError as error:
        if not error.retryable:
            raise
        unavailable[getattr(error, "dependency", None) or type(error).__name__] = None
        return None


def _sessions(groups: dict[str, list[FailureGroup]] | None, status: str) -> int | None:
    if groups is None:
        return None
    return sum(g.sessions for g in groups.get(status, []))


def count_orders(progress: OrderProgress, sessions: SessionOutcomes | None = None) -> Orders:
    """Orders by where they stand: an order whose latest session ended completed or failed
    counts as such (a replayed order whose replay completed counts as completed), one whose
    session has not ended is in flight; an order of an earlier release that recorded its
    steps and no outcome yet counts by its steps (``order_status``)."""
    records = progress.records(up_to=ORDERS_COUNTED_MAX)
    ended = sessions.latest_of_pipeline(PURCHASE, up_to=ORDERS_COUNTED_MAX) if sessions else {}
    statuses = Counter(_status_of(record, ended.get(record.job_id)) for record in records)
    return Orders(
        in_flight=statuses["accepted"] + statuses["running"],
        completed=statuses["completed"],
        failed=statuses["failed"],
        counted=len(records),
    )


def _status_of(record: OrderRecord, latest: SessionOutcome | None) -> str:
    if latest is not None and latest.status != ACCEPTED:
        return latest.status
    return _status_of_steps(record)


@functools.lru_cache(maxsize=2 * ORDERS_COUNTED_MAX)
def _status_of_steps(record: OrderRecord) -> str:
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
