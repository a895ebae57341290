"""Bulk replays: the HTTP API that requests one and reports its progress, and the Storage
queue trigger that runs it."""

from __future__ import annotations

import json
import logging
import uuid

import azure.functions as func

from ..bootstrap import container
from ..domain.confirmations import Selection
from ..domain.errors import InvalidInput
from ..domain.replays import ReplayRequestNotFound
from ..service_layer.bulk_replay import (
    get_bulk_replay,
    mark_bulk_replay_failed,
    request_bulk_replay,
    run_bulk_replay,
)
from .http import FUNCTION_KEY, api_route, endpoint, json_response
from .http_input import MAX_FILTER_LENGTH, json_body, route_value
from .views import replay_request_url, request_view

logger = logging.getLogger(__name__)
bp = func.Blueprint()

REPLAY_FIELDS = ("queue", "task", "reason")
MAX_BODY_BYTES = 4096
EXAMPLE = '{"task": "ProcessPayment", "reason": "PaymentProviderUnavailable"}'


@bp.route(route=api_route("replays"), methods=["POST"], auth_level=FUNCTION_KEY)
@endpoint
def request_replay(req: func.HttpRequest) -> func.HttpResponse:
    """Replay every failed session that failed at a task and/or with a reason, in the
    background (through a storage queue): 202 with the status URL of the request."""
    document = json_body(req, max_bytes=MAX_BODY_BYTES, example=EXAMPLE)
    unknown = sorted(set(document) - set(REPLAY_FIELDS))
    if unknown:
        raise InvalidInput(unknown[0], f"is not a field; use {', '.join(REPLAY_FIELDS)}")
    selection = Selection(**{name: _optional_text(document, name) for name in REPLAY_FIELDS})
    c = container()
    request = request_bulk_replay(c.replay_requests, c.replay_queue, selection)
    status_url = replay_request_url(req, request.request_id)
    return json_response(
        202, {**request_view(request), "status_url": status_url}, headers={"Location": status_url}
    )


@bp.route(route=api_route("replays/{request_id}"), methods=["GET"], auth_level=FUNCTION_KEY)
@endpoint
def get_replay(req: func.HttpRequest) -> func.HttpResponse:
    """Progress of a bulk replay (or resolution): status, sessions found, sent (resolved),
    taken by another replay or resolution, and failed (with the first errors); ``failure``
    says why when it ended in the poison queue."""
    request_id = request_id_of(route_value(req, "request_id"))
    return json_response(
        200, request_view(get_bulk_replay(container().replay_requests, request_id))
    )


def request_id_of(value: str) -> str:
    """Request ids are UUIDs; anything else ('#', '?', ...) is no key the table could hold,
    so no request: raises ``ReplayRequestNotFound``."""
    try:
        uuid.UUID(value)
    except ValueError:
        raise ReplayRequestNotFound(value) from None
    return value


@bp.queue_trigger(
    arg_name="msg", queue_name="%REPLAY_QUEUE_NAME%", connection="AzureWebJobsStorage"
)
def replay_requests(msg: func.QueueMessage) -> None:
    """Perform a bulk replay. A request that keeps failing goes to the poison queue, and its
    status says why before it does."""
    try:
        request_id = json.loads(msg.get_body())["request_id"]
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(
            f"Queue message {msg.id} is not a replay request ({error!r}); it goes to the poison "
            "queue untouched."
        ) from error
    c = container()
    try:
        run_bulk_replay(
            c.replay_requests,
            c.archive,
            c.resender,
            c.session_seeder,
            request_id,
            audit=c.audit_trail,
        )
    except ReplayRequestNotFound:
        logger.error("Replay request %s does not exist; the message is dropped.", request_id)
    except Exception as error:
        attempt = msg.dequeue_count or 1
        if attempt >= c.settings.replay_max_dequeue_count:
            try:
                mark_bulk_replay_failed(
                    c.replay_requests,
                    request_id,
                    f"Gave up after {attempt} attempts: {type(error).__name__}: {error}. The "
                    "request is in the poison queue; fix the cause and request the replay again.",
                )
            except Exception:
                logger.exception("Could not mark replay request %s failed", request_id)
        else:
            logger.warning(
                "Replay request %s failed on attempt %d; the queue delivers it again.",
                request_id,
                attempt,
            )
        raise


def _optional_text(document: dict[str, object], name: str) -> str | None:
    value = document.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(name, "must be a non-empty string")
    if len(value) > MAX_FILTER_LENGTH:
        raise InvalidInput(name, f"must be at most {MAX_FILTER_LENGTH} characters")
    return value.strip()
