"""The HTTP routes of each declared pipeline that has a ``route`` and no module of its own:
``POST /api/<route>`` starts a job (the body is its payload, checked by the pipeline's
``check_payload``; optional Idempotency-Key) and ``GET /api/<route>/{job_id}`` tells where it
stands, from the session outcomes the processor records."""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Any

import azure.functions as func

from ..bootstrap import app_pipelines, container
from ..domain.pipelines import Pipeline
from ..service_layer.job_status import JobState, get_job
from ..service_layer.jobs import SessionAcceptance, start_job
from .http import FUNCTION_KEY, api_route, endpoint, json_response
from .http_input import header_key, json_body, route_value
from .views import job_url

logger = logging.getLogger(__name__)

bp = func.Blueprint()

MAX_BODY_BYTES = 256 * 1024  # Service Bus standard tier's message size limit


def pipeline_routes(pipeline: Pipeline, route: str) -> None:
    """Register the start and status functions of ``pipeline`` on ``bp``."""

    @bp.function_name(f"start_{pipeline.name}")
    @bp.route(route=api_route(route), methods=["POST"], auth_level=FUNCTION_KEY)
    @endpoint
    def start(req: func.HttpRequest) -> func.HttpResponse:
        """202 once the job's tasks are enqueued as one session, with a Location to follow
        it; 400 naming the field the pipeline's payload check refuses."""
        document = json_body(req, max_bytes=MAX_BODY_BYTES, example="{...}")
        c = container()
        job = start_job(
            pipeline,
            document,
            sender=c.task_sender,
            queue_name=c.settings.queue_of(pipeline.name),
            acceptance=SessionAcceptance(c.session_outcomes, pipeline),
            idempotency_key=header_key(req),
            requests=c.idempotent_requests,
        )
        logger.info("Accepted %s job=%s", pipeline.name, job.job_id)
        url = job_url(req, route, job.job_id)
        return json_response(
            202, {**asdict(job), "status": "accepted", "status_url": url}, headers={"Location": url}
        )

    @bp.function_name(f"get_{pipeline.name}_job")
    @bp.route(route=api_route(f"{route}/{{job_id}}"), methods=["GET"], auth_level=FUNCTION_KEY)
    @endpoint
    def status(req: func.HttpRequest) -> func.HttpResponse:
        """accepted (its session still runs), completed, or failed (and why); each task's
        state, the failed task and its reason, the outputs the pipeline shows; each session
        of the job (the first, then its replays) with its outcome; 404 unknown."""
        c = container()
        job_id = route_value(req, "job_id")
        job = get_job(pipeline, c.session_outcomes, job_id, failures=c.archive)
        return json_response(200, job_view(job))


def job_view(job: JobState) -> dict[str, Any]:
    view = asdict(job)
    view["sessions"] = [asdict(session) for session in job.sessions]
    view["tasks"] = [asdict(task) for task in job.tasks]
    return view


for _pipeline in app_pipelines().declared:
    if _pipeline.route is not None and not _pipeline.own_routes:
        pipeline_routes(_pipeline, _pipeline.route)
