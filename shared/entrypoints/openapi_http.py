"""``GET /api/openapi.json``: the HTTP API's OpenAPI document (``openapi``), with the start
and status routes of every pipeline the app runs."""

from __future__ import annotations

import azure.functions as func

from ..bootstrap import container
from .http import FUNCTION_KEY, api_route, endpoint, json_response
from .openapi import OPENAPI_ROUTE, openapi_document

bp = func.Blueprint()


@bp.route(route=api_route(OPENAPI_ROUTE), methods=["GET"], auth_level=FUNCTION_KEY)
@endpoint
def get_openapi(req: func.HttpRequest) -> func.HttpResponse:
    """The API's OpenAPI 3.1 document; its server is PUBLIC_BASE_URL when set."""
    c = container()
    server = c.settings.public_base_url or "/"
    return json_response(200, openapi_document(c.pipelines.declared, server=server))
