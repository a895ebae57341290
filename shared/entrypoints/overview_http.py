"""HTTP API of the operator's overview: orders in flight and completed, import jobs still
running, failed sessions by group and status, dead letters waiting for the archive."""

from __future__ import annotations

import azure.functions as func

from ..bootstrap import container
from ..domain.roles import Role
from ..service_layer.overview import overview
from .http import FUNCTION_KEY, api_route, endpoint, json_response
from .operator_views import overview_view
from .roles import requires

bp = func.Blueprint()


@bp.route(route=api_route("overview"), methods=["GET"], auth_level=FUNCTION_KEY)
@endpoint
@requires(Role.READER)
def get_overview(req: func.HttpRequest) -> func.HttpResponse:
    """What the console's front page shows, as JSON."""
    c = container()
    return json_response(
        200,
        overview_view(
            overview(
                c.overview_sources, c.session_queues, pipelines=c.settings.queues, gates=c.gates
            )
        ),
    )
