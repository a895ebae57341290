"""HTTP API that accepts orders: POST /api/orders enqueues the order's tasks as one session."""

from __future__ import annotations

import json
import logging

import azure.functions as func
from azure.servicebus.exceptions import ServiceBusError

# SessionTooLarge belongs in shared.domain.errors (the lead is asked to move it); until then
# the binding, the outermost layer, reads it from the adapter that raises it.
from ..adapters.servicebus_sender import SessionTooLarge
from ..bootstrap import container
from ..domain.errors import InvalidInput
from ..service_layer.orders import submit_order
from .problems import json_response, problem

logger = logging.getLogger(__name__)

bp = func.Blueprint()

MAX_BODY_BYTES = 256 * 1024  # Service Bus standard tier's message size limit
RETRY_AFTER_SECONDS = 30


@bp.route(route="orders", methods=["POST"], auth_level=func.AuthLevel.FUNCTION)
def submit_order_http(req: func.HttpRequest) -> func.HttpResponse:
    """202 once the order's tasks are enqueued; with an ``Idempotency-Key`` header a repeat
    returns the same job id and is dropped by duplicate detection."""
    body = req.get_body()
    if len(body) > MAX_BODY_BYTES:
        return problem(
            413,
            "The order is too large",
            f"The body is {len(body)} bytes; send at most {MAX_BODY_BYTES} bytes (256 KiB).",
        )
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError) as error:
        return problem(
            400,
            "The body is not JSON",
            f"Send the order as a JSON object (Content-Type: application/json): {error}.",
        )
    if not isinstance(document, dict):
        return problem(
            400,
            "The body must be a JSON object",
            'Send {"customer_email": "...", "card_token": "...", "lines": [...]}.',
        )
    c = container()
    try:
        order = submit_order(
            document,
            sender=c.task_sender,
            queue_name=c.settings.purchase_queue_name,
            idempotency_key=req.headers.get("Idempotency-Key"),
        )
    except InvalidInput as error:
        return problem(
            400,
            "The order is invalid",
            f"{error.field} {error.problem}",
            errors=[{"field": error.field, "problem": error.problem}],
        )
    except SessionTooLarge as error:
        return problem(
            413,
            "The order is too large to enqueue",
            f"{error} Send fewer or shorter lines.",
        )
    except ServiceBusError as error:
        logger.warning("Could not enqueue an order: %s", type(error).__name__)
        return problem(
            503,
            "The order queue is unavailable",
            "The order was not accepted because Service Bus could not be reached. Retry in "
            f"{RETRY_AFTER_SECONDS} seconds with the same Idempotency-Key so it is not "
            "accepted twice.",
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )
    logger.info("Accepted order job=%s session=%s", order.job_id, order.session_id)
    return json_response(
        202,
        {
            "job_id": order.job_id,
            "session_id": order.session_id,
            "tasks": list(order.tasks),
            "status": "accepted",
        },
        headers={"Location": f"/api/orders/{order.job_id}"},
    )
