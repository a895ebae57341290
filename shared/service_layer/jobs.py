"""Starting a job of a declared pipeline (its payload checked, its tasks enqueued as one
session) and telling where it stands, from the session outcomes the processor records: what
the generic start and status routes of ``shared.entrypoints.pipeline_http`` call."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ..domain.idempotency import fingerprint
from ..domain.session_outcomes import (
    ACCEPTED,
    JobNotFound,
    JobStatus,
    SessionOutcome,
    job_status,
)
from .clock import Clock, utc_now
from .idempotency import IdempotentRequests
from .pipelines import Pipeline
from .ports import SessionOutcomes, TaskSender

# Fixed namespace: the same pipeline and Idempotency-Key always yield the same job id.
_JOB_NAMESPACE = uuid.UUID("0b6f3c1e-2f4e-4d8e-9a57-7d1f2b8c4e90")


@dataclass(frozen=True)
class StartedJob:
    job_id: str
    session_id: str
    queue_name: str
    tasks: tuple[str, ...]


@dataclass(frozen=True)
class JobState:
    job_id: str
    pipeline: str
    status: JobStatus
    reason: str | None  # the latest failure's, while the job stands failed
    sessions: tuple[SessionOutcome, ...]  # the first session, then its replays


def start_job(
    pipeline: Pipeline,
    document: Mapping[str, Any],
    *,
    sender: TaskSender,
    queue_name: str,
    outcomes: SessionOutcomes,
    idempotency_key: str | None = None,
    requests: IdempotentRequests | None = None,
    clock: Clock = utc_now,
) -> StartedJob:
    """Check the payload with the pipeline's ``check_payload`` (``InvalidInput`` naming the
    field, before anything is sent), enqueue every task as one session, then record the job
    as accepted. With an Idempotency-Key the job id derives from the key, and with
    ``requests`` a repeat gets the first result without sending anything (the key with
    another payload is refused, as for orders)."""
    pipeline.check_payload(document)

    def start(job_id: str) -> StartedJob:
        messages = pipeline.messages(job_id, document)
        sender.send_session(queue_name, job_id, messages)
        outcomes.accept(
            SessionOutcome(job_id, job_id, pipeline.name, ACCEPTED, clock().isoformat())
        )
        return StartedJob(job_id, job_id, queue_name, tuple(m.task for m in messages))

    if not idempotency_key:
        return start(str(uuid.uuid4()))
    job_id = str(uuid.uuid5(_JOB_NAMESPACE, f"{pipeline.name}:{idempotency_key}"))
    if requests is None:
        return start(job_id)
    result = requests.run(
        pipeline.name, idempotency_key, fingerprint(document), lambda: asdict(start(job_id))
    )
    return StartedJob(
        result["job_id"], result["session_id"], result["queue_name"], tuple(result["tasks"])
    )


def get_job(pipeline: Pipeline, outcomes: SessionOutcomes, job_id: str) -> JobState:
    """Where a job stands. Raises ``JobNotFound`` when nothing was recorded of it."""
    sessions = [o for o in outcomes.of_job(job_id) if o.pipeline == pipeline.name]
    if not sessions:
        raise JobNotFound(pipeline.route or pipeline.name, job_id)
    status = job_status(sessions)
    latest = max(sessions, key=lambda o: o.at)
    return JobState(
        job_id=job_id,
        pipeline=pipeline.name,
        status=status,
        reason=latest.reason if status == "failed" else None,
        sessions=tuple(sessions),
    )
