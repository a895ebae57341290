"""HTTP API of product imports: GET /api/imports/{job_id} reports how far a job has come."""

from __future__ import annotations

from dataclasses import asdict

import azure.functions as func

from ..bootstrap import container
from ..service_layer.imports import get_import_status
from .http import FUNCTION_KEY, api_route, endpoint, json_response
from .http_input import route_value

bp = func.Blueprint()


@bp.route(route=api_route("imports/{job_id}"), methods=["GET"], auth_level=FUNCTION_KEY)
@endpoint
def get_import(req: func.HttpRequest) -> func.HttpResponse:
    """Rows read, rejected and sent (the Spark job's manifest) and rows imported, failed and
    pending (what the import tasks recorded). 404 when neither knows the job."""
    c = container()
    status = get_import_status(c.import_manifests, c.import_progress, route_value(req, "job_id"))
    return json_response(200, asdict(status))
