"""The console's pages of jobs, for every declared pipeline: a pipeline's jobs, latest first
(``/console/jobs/<pipeline>``), one job (each task's state, the failed task and why, the
outputs its declaration shows, its sessions), and "Find" for any job id or order number
(``/console/jobs?ref=``), which opens the job's page (an order's own page for an order
number)."""

from __future__ import annotations

from urllib.parse import quote

import azure.functions as func

from ...bootstrap import container
from ...domain.errors import NotFound
from ...service_layer.job_status import get_job, list_jobs, pipeline_of_job
from ..http_input import MAX_ID_LENGTH, query_text, route_value
from .frame import ANONYMOUS, Visit, console_view, redirect

bp = func.Blueprint()

JOBS_LISTED = 100


@bp.route(route="console/jobs", methods=["GET"], auth_level=ANONYMOUS)
@console_view
def console_find_job(visit: Visit) -> func.HttpResponse:
    """Any job by its id (its pipeline's job page), or an order by its number; 404 naming
    what was looked for when no pipeline knows it."""
    reference = query_text(visit.req, "ref", max_length=MAX_ID_LENGTH)
    c = container()
    missing = None
    if reference:
        pipeline = pipeline_of_job(c.session_outcomes, reference)
        if pipeline is not None:
            return redirect(job_path(visit.base, pipeline, reference))
        try:
            order = c.order_lookup.find(reference)
        except NotFound:
            missing = (
                f"No job of any pipeline has the id {reference!r}, and no order has that "
                "number. Use the job_id that the start route answered with."
            )
        else:
            return redirect(f"{visit.base}/orders?ref={quote(order.job_id, safe='')}")
    return visit.page(
        "find_job.html",
        http_status=404 if missing else 200,
        reference=reference or "",
        missing=missing,
        pipelines=list(c.pipelines.declared),
    )


@bp.route(route="console/jobs/{pipeline}", methods=["GET"], auth_level=ANONYMOUS)
@console_view
def console_jobs(visit: Visit) -> func.HttpResponse:
    """A declared pipeline's jobs, the latest first, each with its status."""
    c = container()
    pipeline = c.pipelines.declared.find(route_value(visit.req, "pipeline"))
    if pipeline is None:
        raise NotFound("There is no such pipeline: the overview lists the declared ones.")
    jobs = list_jobs(pipeline, c.session_outcomes, up_to=JOBS_LISTED)
    return visit.page("jobs.html", pipeline=pipeline, jobs=jobs, listed_max=JOBS_LISTED)


@bp.route(route="console/jobs/{pipeline}/{job_id}", methods=["GET"], auth_level=ANONYMOUS)
@console_view
def console_job(visit: Visit) -> func.HttpResponse:
    """One job: its status, each task's state, the failed task and why, the outputs its
    pipeline shows, its sessions; refreshed while it runs."""
    c = container()
    pipeline = c.pipelines.declared.find(route_value(visit.req, "pipeline"))
    job_id = route_value(visit.req, "job_id")
    if pipeline is None:
        raise NotFound("There is no such pipeline: the overview lists the declared ones.")
    job = get_job(pipeline, c.session_outcomes, job_id, failures=c.archive)
    return visit.page("job.html", pipeline=pipeline, job=job)


def job_path(base: str, pipeline: str, job_id: str) -> str:
    return f"{base}/jobs/{quote(pipeline, safe='')}/{quote(job_id, safe='')}"
