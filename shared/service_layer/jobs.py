"""Starting a job of a declared pipeline (its payload checked, its tasks enqueued as one
session): what the generic start route of ``shared.entrypoints.pipeline_http`` calls, and the
purchase's ``POST /api/orders`` (``shared.entrypoints.orders_http``) starts its jobs with.
Where a job stands is ``job_status``."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from ..domain.errors import PipelineError, SendUnconfirmed
from ..domain.idempotency import fingerprint
from ..domain.pipelines import PURCHASE, Pipeline
from ..domain.session_outcomes import ACCEPTED, SessionOutcome
from .clock import Clock, utc_now
from .idempotency import IdempotentRequests
from .ports import SessionOutcomes, TaskSender

logger = logging.getLogger(__name__)

# Fixed namespace: the same pipeline and Idempotency-Key always yield the same job id.
_JOB_NAMESPACE = uuid.UUID("0b6f3c1e-2f4e-4d8e-9a57-7d1f2b8c4e90")
# A purchase's job id as earlier releases derived it: from the key alone, in a namespace of
# its own.
_EARLIER_PURCHASE_NAMESPACE = uuid.UUID("6f1c6f55-6a55-4f1e-9d55-3c3f0d5c2a11")


def job_ids(pipeline: Pipeline, idempotency_key: str) -> tuple[str, ...]:
    """The ids a job of ``pipeline`` started with ``idempotency_key`` has had: the one it gets
    now first, then those earlier releases gave it (docs/deploy.md, "Stored shapes")."""
    now = str(uuid.uuid5(_JOB_NAMESPACE, f"{pipeline.name}:{idempotency_key}"))
    if pipeline.name == PURCHASE:
        return (now, str(uuid.uuid5(_EARLIER_PURCHASE_NAMESPACE, idempotency_key)))
    return (now,)


def resumed_job_id(
    pipeline: Pipeline, idempotency_key: str, started: Callable[[str], bool] | None
) -> str:
    """The id for a job whose first request with ``idempotency_key`` died in flight, under
    this release or an earlier one: the first of ``job_ids`` that ``started`` says a job was
    started with, else the one of now. Its messages then get the ids the first request's
    had, and Service Bus duplicate detection drops them if they were sent."""
    ids = job_ids(pipeline, idempotency_key)
    if started is not None:
        return next((job_id for job_id in ids if started(job_id)), ids[0])
    return ids[0]


@dataclass(frozen=True)
class StartedJob:
    job_id: str
    session_id: str
    queue_name: str
    tasks: tuple[str, ...]


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
    started: Callable[[str], bool] | None = None,
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
    (``IdempotencyKeyInFlight``). A repeat that takes the key over from a first request that
    died in flight starts the job under the id ``resumed_job_id`` finds with ``started``
    (whether a job was started with an id), which may be an earlier release's."""
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
    key = idempotency_key
    job_id = job_ids(pipeline, key)[0]
    if requests is None:
        return start(job_id)
    scope = pipeline.route or pipeline.name
    result = requests.run(
        scope,
        key,
        fingerprint(payload),
        lambda: asdict(start(job_id)),
        resume=lambda: asdict(start(resumed_job_id(pipeline, key, started))),
    )
    return StartedJob(
        result["job_id"], result["session_id"], result["queue_name"], tuple(result["tasks"])
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
