"""The console's front page in one read: orders in flight and completed, import jobs still
running, failed sessions by group, how many were replayed or resolved, each declared pipeline
with its queue, its failed sessions and its dead letters still waiting for the archive timer."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..domain.import_jobs import ImportJobStatus, import_job_status
from ..domain.order_status import order_status
from ..domain.pipelines import PURCHASE_TASKS
from .failed_sessions import FailureGroup, group_failed_sessions
from .operator_ports import DeadLetterCounter
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


@dataclass(frozen=True)
class Sources:
    """What the overview reads."""

    archive: DeadLetterArchive
    counter: DeadLetterCounter
    orders: OrderProgress
    manifests: ImportManifests
    imports: ImportProgress


def overview(
    sources: Sources, queues: Sequence[str], *, pipelines: Mapping[str, str] | None = None
) -> Overview:
    """``queues``: the session queues whose waiting dead letters are counted; ``pipelines``:
    each declared pipeline's queue, by the pipeline's name (``Settings.queues``)."""
    groups = group_failed_sessions(sources.archive, status="failed")
    replayed = group_failed_sessions(sources.archive, status="replayed")
    resolved = group_failed_sessions(sources.archive, status="resolved")
    waiting = {q: sources.counter.waiting(q, up_to=WAITING_COUNT_MAX) for q in queues}
    return Overview(
        orders=count_orders(sources.orders),
        imports=imports_in_progress(sources.manifests, sources.imports),
        groups=groups,
        failed=sum(g.sessions for g in groups),
        replayed=sum(g.sessions for g in replayed),
        resolved=sum(g.sessions for g in resolved),
        waiting=waiting,
        pipelines=[
            PipelineCounts(
                pipeline=name,
                queue=queue,
                failed=sum(g.sessions for g in groups if g.queue == queue),
                waiting=waiting[queue]
                if queue in waiting
                else sources.counter.waiting(queue, up_to=WAITING_COUNT_MAX),
            )
            for name, queue in (pipelines or {}).items()
        ],
    )


def count_orders(progress: OrderProgress) -> Orders:
    """Orders by where they stand, from their recorded steps (``order_status``): a replayed
    order whose replay completed counts as completed."""
    records = progress.records(up_to=ORDERS_COUNTED_MAX)
    statuses = Counter(
        order_status(
            record, PURCHASE_TASKS, order_number=None, charged=None, failure=None, claim=None
        ).status
        for record in records
    )
    return Orders(
        in_flight=statuses["accepted"] + statuses["running"],
        completed=statuses["completed"],
        failed=statuses["failed"],
        counted=len(records),
    )


def imports_in_progress(
    manifests: ImportManifests, progress: ImportProgress
) -> list[ImportJobStatus]:
    """The import jobs with rows still to import, by job id."""
    jobs = [
        import_job_status(m.job_id, m, progress.counts(m.job_id))
        for m in manifests.list_manifests(up_to=IMPORT_JOBS_READ_MAX)
    ]
    return sorted((job for job in jobs if job.status != "completed"), key=lambda j: j.job_id)
