"""HTTP API of product imports: GET /api/imports/{job_id} reports how far a job has come."""

from __future__ import annotations

import logging
from dataclasses import asdict

import azure.functions as func
from azure.core.exceptions import AzureError

from ..bootstrap import container
from ..domain.import_jobs import ImportJobNotFound
from ..service_layer.imports import get_import_status
from .problems import json_response, problem
from .routes import route_value

logger = logging.getLogger(__name__)

bp = func.Blueprint()

RETRY_AFTER_SECONDS = 30


@bp.route(route="imports/{job_id}", methods=["GET"], auth_level=func.AuthLevel.FUNCTION)
def get_import(req: func.HttpRequest) -> func.HttpResponse:
    """Rows read, rejected and sent (the Spark job's manifest) and rows imported, failed and
    pending (what the import tasks recorded). 404 when neither knows the job."""
    job_id = route_value(req, "job_id")
    c = container()
    try:
        status = get_import_status(c.import_manifests, c.import_progress, job_id)
    except ImportJobNotFound as error:
        return problem(404, "Unknown import job", str(error))
    except AzureError as error:
        logger.warning("get_import could not reach Table Storage: %s", type(error).__name__)
        return problem(
            503,
            "Table Storage is unavailable",
            f"The import's progress could not be read. Retry in {RETRY_AFTER_SECONDS} seconds.",
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )
    return json_response(200, asdict(status))
