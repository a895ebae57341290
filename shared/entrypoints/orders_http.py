"""HTTP API of orders: POST /api/orders enqueues the order's tasks as one session;
GET /api/orders/{job_id} tells where it stands."""

from __future__ import annotations

import logging

import azure.functions as func

from ..bootstrap import container
from ..domain.pipelines import PURCHASE
from ..service_layer.jobs import start_job
from .http import FUNCTION_KEY, api_route, endpoint, json_response
from .http_input import header_key, json_body, route_value
from .views import order_status_view, order_url, order_view

logger = logging.getLogger(__name__)

bp = func.Blueprint()

MAX_BODY_BYTES = 256 * 1024  # Service Bus standard tier's message size limit
EXAMPLE = '{"customer_email": "...", "card_token": "...", "lines": [...]}'


@bp.route(route=api_route("orders"), methods=["POST"], auth_level=FUNCTION_KEY)
@endpoint
def submit_order_http(req: func.HttpRequest) -> func.HttpResponse:
    """202 once the order's tasks are enqueued, with a Location to follow the order. With an
    ``Idempotency-Key`` header a repeat gets the first response and enqueues nothing; the key
    with another order is a 422, and a repeat while the first is in flight a 409."""
    key = header_key(req)
    document = json_body(req, max_bytes=MAX_BODY_BYTES, example=EXAMPLE)
    c = container()
    order = start_job(
        c.pipelines.declared.get(PURCHASE),
        document,
        sender=c.task_sender,
        queue_name=c.settings.queue_of(PURCHASE),
        acceptance=c.order_progress,
        idempotency_key=key,
        requests=c.idempotent_requests,
        started=lambda job_id: c.order_progress.find(job_id) is not None,
    )
    logger.info("Accepted order job=%s session=%s", order.job_id, order.session_id)
    return json_response(
        202, order_view(req, order), headers={"Location": order_url(req, order.job_id)}
    )


@bp.route(route=api_route("orders/{job_id}"), methods=["GET"], auth_level=FUNCTION_KEY)
@endpoint
def get_order(req: func.HttpRequest) -> func.HttpResponse:
    """Where the order stands: accepted, running (the next step), completed (order number and
    total), failed (the task and why) or replayed (as which session), and the replays of its
    failed session with their outcomes (one that failed again is flagged); 404 unknown."""
    status = container().order_lookup.status(route_value(req, "job_id"))
    return json_response(200, order_status_view(status))


@bp.route(route=api_route("order-numbers/{order_number}"), methods=["GET"], auth_level=FUNCTION_KEY)
@endpoint
def get_order_by_number(req: func.HttpRequest) -> func.HttpResponse:
    """The order an order number was given to (a job id is found too), as GET
    /api/orders/{job_id} tells it, that URL in Content-Location; 404 when no order has it."""
    status = container().order_lookup.find(route_value(req, "order_number"))
    return json_response(
        200, order_status_view(status), headers={"Content-Location": order_url(req, status.job_id)}
    )
