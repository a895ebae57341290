"""Where a job of a declared pipeline stands, from what every pipeline records: the outcome of
each of its sessions (the first, then its replays: ``sessionoutcomes``), the failure record
the processor journals when a session fails (the failed task, its reason and the context the
earlier tasks left), and the outputs its declaration ``shows``. What the generic status route
(``GET /api/<route>/{job_id}``) and the console's job pages tell."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..domain.archive import FailureRecord
from ..domain.pipelines import Pipeline
from ..domain.session_outcomes import (
    COMPLETED,
    FAILED,
    JobNotFound,
    JobStatus,
    SessionOutcome,
    job_status,
)
from .ports import DeadLetterArchive, SessionOutcomes

# pending: not known to have run yet (the job's session still runs); not-run: a task after
# the failed one of a pipeline that stops on failure.
TaskStatus = Literal["pending", "completed", "failed", "not-run"]


@dataclass(frozen=True)
class TaskState:
    task: str
    step: int
    state: TaskStatus


@dataclass(frozen=True)
class FailedTask:
    """The failed task of the job's latest session, as the processor recorded it."""

    task: str
    step: int | None
    reason: str
    description: str
    at: str


@dataclass(frozen=True)
class JobState:
    job_id: str
    pipeline: str
    status: JobStatus
    reason: str | None  # the latest failure's, while the job stands failed
    sessions: tuple[SessionOutcome, ...]  # the first session, then its replays
    tasks: tuple[TaskState, ...] = ()  # each declared task, in order, in the latest session
    failed: FailedTask | None = None
    # What the tasks returned under the keys the declaration ``shows`` (once known)
    outputs: Mapping[str, Any] = field(default_factory=dict)


def get_job(
    pipeline: Pipeline,
    outcomes: SessionOutcomes,
    job_id: str,
    *,
    failures: DeadLetterArchive | None = None,
) -> JobState:
    """Where a job stands: its status, each task's state in its latest session, the failed
    task and why (from ``failures``, the archive's failure records), and the outputs the
    pipeline shows. Raises ``JobNotFound`` when nothing was recorded of it."""
    sessions = [o for o in outcomes.of_job(job_id) if o.pipeline == pipeline.name]
    if not sessions:
        raise JobNotFound(pipeline.route or pipeline.name, job_id)
    status = job_status(sessions)
    latest = max(sessions, key=lambda o: o.at)
    record = None
    if status == FAILED and failures is not None:
        record = failures.find_record(latest.session_id)
    return JobState(
        job_id=job_id,
        pipeline=pipeline.name,
        status=status,
        reason=latest.reason if status == FAILED else None,
        sessions=tuple(sessions),
        tasks=task_states(pipeline, status, record),
        failed=_failed(record),
        outputs=_outputs(pipeline, latest, record),
    )


def task_states(
    pipeline: Pipeline, status: JobStatus, record: FailureRecord | None
) -> tuple[TaskState, ...]:
    """Each declared task's state: all completed, or all pending while the session runs; in
    a failed session, the tasks before the failed one completed, the failed one failed, and
    the rest not run (stop on failure) or completed (continue on failure)."""
    states: list[TaskState] = []
    failed_step = record.step if record is not None else None
    for step, task in enumerate(pipeline.tasks, start=1):
        state: TaskStatus
        if status == COMPLETED:
            state = "completed"
        elif status != FAILED:
            state = "pending"
        elif record is None:
            state = "failed" if len(pipeline.tasks) == 1 else "pending"
        elif task == record.task and (failed_step is None or failed_step == step):
            state = "failed"
        elif failed_step is not None and step < failed_step:
            state = "completed"
        else:
            state = "not-run" if pipeline.stops_on_failure else "completed"
        states.append(TaskState(task, step, state))
    return tuple(states)


def _failed(record: FailureRecord | None) -> FailedTask | None:
    if record is None:
        return None
    return FailedTask(record.task, record.step, record.reason, record.description, record.at)


def _outputs(
    pipeline: Pipeline, latest: SessionOutcome, record: FailureRecord | None
) -> dict[str, Any]:
    found = dict(latest.outputs) if latest.status == COMPLETED else {}
    if record is not None:
        found = {key: record.context[key] for key in pipeline.shows if key in record.context}
    return {key: found[key] for key in pipeline.shows if key in found}


@dataclass(frozen=True)
class JobSummary:
    """One job in a pipeline's list: its latest session's outcome, and how many sessions
    (the first and its replays) it had."""

    job_id: str
    status: JobStatus
    at: str
    reason: str | None
    sessions: int


# How many recorded sessions a pipeline's job list reads at most (a table scan by pipeline).
JOBS_READ_MAX = 2000


def list_jobs(pipeline: Pipeline, outcomes: SessionOutcomes, *, up_to: int) -> list[JobSummary]:
    """The pipeline's jobs, the latest first, at most ``up_to`` of them, from at most
    ``JOBS_READ_MAX`` recorded sessions."""
    by_job: dict[str, list[SessionOutcome]] = {}
    for outcome in outcomes.of_pipeline(pipeline.name, up_to=JOBS_READ_MAX):
        by_job.setdefault(outcome.job_id, []).append(outcome)
    jobs = []
    for job_id, sessions in by_job.items():
        latest = max(sessions, key=lambda o: o.at)
        status = job_status(sessions)
        reason = latest.reason if status == FAILED else None
        jobs.append(JobSummary(job_id, status, latest.at, reason, len(sessions)))
    return sorted(jobs, key=lambda j: j.at, reverse=True)[:up_to]


def pipeline_of_job(outcomes: SessionOutcomes, job_id: str) -> str | None:
    """The pipeline of a job the session outcomes know, else None."""
    known = outcomes.of_job(job_id)
    return known[0].pipeline if known else None
