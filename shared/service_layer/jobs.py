"""Starting a job of a declared pipeline (its payload checked, its tasks enqueued as one
session) and telling where it stands, from the session outcomes the processor records: what
the generic start and status routes of ``shared.entrypoints.pipeline_http`` call, and the
purchase's ``POST /api/orders`` (``shared.entrypoints.orders_http``) starts its jobs with."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from ..domain.errors import PipelineError, SendUnconfirmed
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

logger = logging.getLogger(__name__)

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


class Acceptance(Protocol):
    """Where a job is recorded as accepted before its messages are sent (so a job that went
    out is always known), and forgotten again when they could not be sent."""

    def accept(self, job_id: str, session_id: str, at: str) -> None: ...

    def withdraw(self, job_id: str, session_id: str) -> None: ...


@dataclass(frozen=True)
class SessionAcceptance:
    """A job of ``pipeline`` accepted in the session outcomes, where ``get_job`` reads it
    until the processor records how the session ended."""

    outcomes: SessionOutcomes
    pipeline: Pipeline

    def accept(self, job_id: str, session_id: str, at: str) -> None:
        self.outcomes.accept(SessionOutcome(job_id, session_id, self.pipeline.name, ACCEPTED, at))

    def withdraw(self, job_id: str, session_id: str) -> None:
        self.outcomes.withdraw(job_id, session_id)


def start_job(
    pipeline: Pipeline,
    document: Mapping[str, Any],
    *,
    sender: TaskSender,
    queue_name: str,
    acceptance: Acceptance | None = None,
    idempotency_key: str | None = None,
    requests: IdempotentRequests | None = None,
    clock: Clock = utc_now,
) -> StartedJob:
    """Check the payload with the pipeline's ``check_payload`` (``InvalidInput`` naming the
    field, before anything is sent), record the job as accepted with ``acceptance`` (in the
    session outcomes, ``SessionAcceptance``, for the generic status route; in the order
    progress for an order), then enqueue every task as one session carrying the payload (the
    mapping the check returns, its canonical form, else the document as given). A job whose
    messages went out is therefore always known to its status route; when the record cannot
    be written nothing is sent, and when the send fails the record is withdrawn (a send is
    all or nothing: the session's messages go in one batch).

    With an Idempotency-Key the job id derives from the pipeline and the key, so the same
    message ids go out again and duplicate detection drops a repeat; with ``requests`` too,
    the key is scoped to the pipeline's route (the endpoint it was sent to), a repeat with the
    same payload gets the first result without sending anything, the key with another payload
    is refused (``IdempotencyKeyReused``) and a repeat while the first is in flight is refused
    (``IdempotencyKeyInFlight``)."""
    checked = pipeline.check_payload(document)
    payload = checked if isinstance(checked, Mapping) else document

    def start(job_id: str) -> StartedJob:
        messages = pipeline.messages(job_id, payload)
        if acceptance is not None:
            acceptance.accept(job_id, job_id, clock().isoformat())
        try:
            sender.send_session(queue_name, job_id, messages)
        except SendUnconfirmed as error:
            # The job may run: it stays accepted, and the caller is told which it is.
            raise SendUnconfirmed(str(error), job_id=job_id) from error
        except Exception:
            if acceptance is not None:
                _withdraw(acceptance, job_id)
            raise
        return StartedJob(job_id, job_id, queue_name, tuple(m.task for m in messages))

    if not idempotency_key:
        return start(str(uuid.uuid4()))
    job_id = str(uuid.uuid5(_JOB_NAMESPACE, f"{pipeline.name}:{idempotency_key}"))
    if requests is None:
        return start(job_id)
    scope = pipeline.route or pipeline.name
    result = requests.run(
        scope, idempotency_key, fingerprint(payload), lambda: asdict(start(job_id))
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


def _withdraw(acceptance: Acceptance, job_id: str) -> None:
    """Forget the acceptance of a job whose send failed; when that fails too, the record
    says accepted for a job that never ran, which is logged (its status stays "accepted")."""
    try:
        acceptance.withdraw(job_id, job_id)
    except PipelineError as error:
        logger.warning(
            "job=%s was not sent, and its acceptance could not be withdrawn: %s", job_id, error
        )
