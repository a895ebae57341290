"""HTTP API of bulk actions on failed sessions: a bulk replay or resolution through a preview and
a confirmation token, or a bulk replay by filter (task, reason, queue, the time the sessions
failed), run in the background by the replay queue's trigger (``replay_queue``) and followed
here. Every session a bulk action touches is audited under its caller and role."""

from __future__ import annotations

import azure.functions as func

from ..bootstrap import container
from ..domain.roles import Role
from ..domain.time_windows import TIME_EXAMPLE
from ..service_layer.bulk_actions import bulk_action
from ..service_layer.bulk_replay import get_bulk_replay, request_bulk_replay
from . import views
from .http import FUNCTION_KEY, api_route, endpoint, json_response
from .http_input import json_body, request_id_of, route_value
from .operator_input import FILTERS, WINDOW, only_fields, text_field
from .operator_input import selection as selection_of
from .operator_views import preview_view
from .roles import api_caller, requires

bp = func.Blueprint()

MAX_NOTE_BODY_BYTES = 16 * 1024
MAX_BULK_REPLAY_BODY_BYTES = 4096


@bp.route(route=api_route("bulk-previews"), methods=["POST"], auth_level=FUNCTION_KEY)
@endpoint
@requires(Role.OPERATOR)
def preview_bulk(req: func.HttpRequest) -> func.HttpResponse:
    """How many failed sessions of which groups a bulk replay or resolution would touch (by
    task, reason, queue and the time they failed), and the single-use token (valid 15
    minutes) that confirms exactly those."""
    document = json_body(req, max_bytes=MAX_NOTE_BODY_BYTES, example=PREVIEW_EXAMPLE)
    only_fields(document, ("action", *FILTERS, *WINDOW))
    selection = selection_of(document)
    preview = container().operator_desk.preview_bulk(bulk_action(document.get("action")), selection)
    return json_response(201, preview_view(preview))


PREVIEW_EXAMPLE = (
    '{"action": "replay", "task": "ProcessPayment", '
    f'"failed_from": "{TIME_EXAMPLE}", "failed_to": "2026-11-23T10:00:00Z"}}'
)


@bp.route(route=api_route("bulk-actions"), methods=["POST"], auth_level=FUNCTION_KEY)
@endpoint
@requires(Role.OPERATOR)
def confirm_bulk(req: func.HttpRequest) -> func.HttpResponse:
    """Start the bulk action a preview's token confirms (once), with a required note: 202 and
    the request's status URL; 409 when the token is used, expired, for the other action, or
    the sessions changed since the preview."""
    document = json_body(req, max_bytes=MAX_NOTE_BODY_BYTES, example=CONFIRM_EXAMPLE)
    only_fields(document, ("action", "token", "note"))
    who = api_caller(req)
    request = container().operator_desk.confirm_bulk(
        bulk_action(document.get("action")),
        text_field(document, "token") or "",
        who=who.name,
        note=text_field(document, "note"),
        role=who.role_label,
    )
    status_url = views.replay_request_url(req, request.request_id)
    return json_response(
        202,
        {**views.request_view(request), "status_url": status_url},
        headers={"Location": status_url},
    )


CONFIRM_EXAMPLE = '{"action": "replay", "token": "...", "note": "provider is back"}'


BULK_REPLAY_EXAMPLE = (
    '{"task": "ProcessPayment", "reason": "PaymentProviderUnavailable", '
    f'"failed_from": "{TIME_EXAMPLE}"}}'
)


@bp.route(route=api_route("replays"), methods=["POST"], auth_level=FUNCTION_KEY)
@endpoint
@requires(Role.OPERATOR)
def request_replay(req: func.HttpRequest) -> func.HttpResponse:
    """Replay every failed session that failed at a task, with a reason and/or between two
    times, in the background (through a storage queue): 202 with the status URL of the
    request. Each session replayed is audited under the caller (its key's digest and role)."""
    document = json_body(req, max_bytes=MAX_BULK_REPLAY_BODY_BYTES, example=BULK_REPLAY_EXAMPLE)
    only_fields(document, (*FILTERS, *WINDOW))
    selection = selection_of(document, strict=True)
    c, who = container(), api_caller(req)
    request = request_bulk_replay(
        c.replay_requests, c.replay_queue, selection, who=who.name, role=who.role_label
    )
    status_url = views.replay_request_url(req, request.request_id)
    return json_response(
        202,
        {**views.request_view(request), "status_url": status_url},
        headers={"Location": status_url},
    )


@bp.route(route=api_route("replays/{request_id}"), methods=["GET"], auth_level=FUNCTION_KEY)
@endpoint
@requires(Role.READER)
def get_replay(req: func.HttpRequest) -> func.HttpResponse:
    """Progress of a bulk replay (or resolution): status, sessions found, sent (resolved),
    taken by another replay or resolution, and failed (with the first errors); ``failure``
    says why when it ended in the poison queue."""
    request_id = request_id_of(route_value(req, "request_id"))
    return json_response(
        200, views.request_view(get_bulk_replay(container().replay_requests, request_id))
    )
