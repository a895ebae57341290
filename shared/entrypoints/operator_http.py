"""HTTP API of what an operator does to failed sessions beyond a plain replay: their root
causes (fingerprints), a session's history, edit and replay, resolve without replay, and bulk
replays and resolutions through a preview and a confirmation token. The console does the same
through the same services."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import azure.functions as func

from ..bootstrap import container
from ..domain.archive import STATUS_CHOICES, SummaryFilter, status_filter
from ..domain.confirmations import Selection
from ..domain.errors import InvalidInput
from ..service_layer.bulk_actions import bulk_action
from ..service_layer.fingerprints import failure_fingerprints, sessions_with_fingerprint
from ..service_layer.history import session_history
from ..service_layer.operator_desk import Ask
from . import views
from .http import FUNCTION_KEY, api_route, endpoint, json_response
from .http_input import (
    MAX_FILTER_LENGTH,
    caller,
    json_body,
    query_choice,
    query_text,
    required_header_key,
    route_value,
)
from .operator_views import history_view, preview_view, resolution_view

bp = func.Blueprint()

MAX_EDIT_BODY_BYTES = 1024 * 1024  # a session's edited messages, each at most 256 KiB
MAX_NOTE_BODY_BYTES = 16 * 1024
FILTERS = ("queue", "task", "reason")


@bp.route(route=api_route("failed-session-fingerprints"), methods=["GET"], auth_level=FUNCTION_KEY)
@endpoint
def failed_session_fingerprints(req: func.HttpRequest) -> func.HttpResponse:
    """The root causes of the sessions chosen by queue, task, reason and status: sessions
    whose descriptions match once ids, numbers and amounts are set aside, most first."""
    found = failure_fingerprints(container().archive, _selected(req))
    return json_response(200, {"fingerprints": [asdict(f) for f in found]})


@bp.route(
    route=api_route("failed-session-fingerprints/{fingerprint}"),
    methods=["GET"],
    auth_level=FUNCTION_KEY,
)
@endpoint
def failed_session_fingerprint(req: func.HttpRequest) -> func.HttpResponse:
    """Every session (chosen as above) of one root cause."""
    wanted = route_value(req, "fingerprint")
    found = sessions_with_fingerprint(container().archive, wanted, _selected(req))
    return json_response(
        200, {"fingerprint": wanted, "items": [views.session_view(s) for s in found]}
    )


@bp.route(
    route=api_route("failed-sessions/{session_id}/history"),
    methods=["GET"],
    auth_level=FUNCTION_KEY,
)
@endpoint
def failed_session_history(req: func.HttpRequest) -> func.HttpResponse:
    """What operators did to the session (who, when, why, each edit's JSON diff) and its
    replays with their outcomes; ``failed_again`` when a replay failed again."""
    c = container()
    history = session_history(
        c.archive,
        c.audit_trail,
        c.replay_progress,
        route_value(req, "session_id"),
    )
    return json_response(200, history_view(history))


@bp.route(
    route=api_route("failed-sessions/{session_id}/edit-and-replay"),
    methods=["POST"],
    auth_level=FUNCTION_KEY,
)
@endpoint
def edit_and_replay_session(req: func.HttpRequest) -> func.HttpResponse:
    """Replay the session with some messages' bodies replaced, each checked like the
    original; the archive keeps the originals; a note is required. Idempotency-Key rules as
    for a replay. 202 like a replay, with a Location to follow the replayed work."""
    session_id = route_value(req, "session_id")
    key = required_header_key(req)
    document = json_body(req, max_bytes=MAX_EDIT_BODY_BYTES, example=EDIT_EXAMPLE)
    _only(document, ("messages", "note"))
    messages = document.get("messages")
    if not isinstance(messages, dict) or not messages:
        raise InvalidInput("messages", "must map row keys to the edited message bodies")
    edited = {str(k): json.dumps(v, ensure_ascii=False) for k, v in messages.items()}
    ask = Ask(key, caller(req), _text(document, "note"))
    result = container().operator_desk.edit_and_replay(session_id, edited, ask)
    return json_response(
        202,
        views.replay_view(req, result),
        headers={"Location": views.replay_status_url(req, result)},
    )


EDIT_EXAMPLE = '{"note": "currency typo", "messages": {"00000000000000000003": {...}}}'


@bp.route(
    route=api_route("failed-sessions/{session_id}/resolve"),
    methods=["POST"],
    auth_level=FUNCTION_KEY,
)
@endpoint
def resolve_failed_session(req: func.HttpRequest) -> func.HttpResponse:
    """Mark the session resolved without a replay, with a required note: it leaves the
    default list and no later replay sends it. Idempotency-Key rules as for a replay; 409
    when another request replayed or resolved it first."""
    session_id = route_value(req, "session_id")
    key = required_header_key(req)
    document = json_body(req, max_bytes=MAX_NOTE_BODY_BYTES, example='{"note": "duplicate"}')
    _only(document, ("note",))
    ask = Ask(key, caller(req), _text(document, "note"))
    resolution = container().operator_desk.resolve(session_id, ask)
    view = {
        **resolution_view(resolution),
        "failed_session_url": views.failed_session_url(req, session_id),
    }
    return json_response(200, view)


@bp.route(route=api_route("bulk-previews"), methods=["POST"], auth_level=FUNCTION_KEY)
@endpoint
def preview_bulk(req: func.HttpRequest) -> func.HttpResponse:
    """How many failed sessions of which groups a bulk replay or resolution would touch, and
    the single-use token (valid 15 minutes) that confirms exactly those."""
    document = json_body(req, max_bytes=MAX_NOTE_BODY_BYTES, example=PREVIEW_EXAMPLE)
    _only(document, ("action", *FILTERS))
    selection = Selection(**{name: _text(document, name) for name in FILTERS})
    preview = container().operator_desk.preview_bulk(bulk_action(document.get("action")), selection)
    return json_response(201, preview_view(preview))


PREVIEW_EXAMPLE = '{"action": "replay", "task": "ProcessPayment"}'


@bp.route(route=api_route("bulk-actions"), methods=["POST"], auth_level=FUNCTION_KEY)
@endpoint
def confirm_bulk(req: func.HttpRequest) -> func.HttpResponse:
    """Start the bulk action a preview's token confirms (once), with a required note: 202 and
    the request's status URL; 409 when the token is used, expired, for the other action, or
    the sessions changed since the preview."""
    document = json_body(req, max_bytes=MAX_NOTE_BODY_BYTES, example=CONFIRM_EXAMPLE)
    _only(document, ("action", "token", "note"))
    request = container().operator_desk.confirm_bulk(
        bulk_action(document.get("action")),
        _text(document, "token") or "",
        who=caller(req),
        note=_text(document, "note"),
    )
    status_url = views.replay_request_url(req, request.request_id)
    return json_response(
        202,
        {**views.request_view(request), "status_url": status_url},
        headers={"Location": status_url},
    )


CONFIRM_EXAMPLE = '{"action": "replay", "token": "...", "note": "provider is back"}'


def _selected(req: func.HttpRequest) -> SummaryFilter:
    status = query_choice(req, "status", STATUS_CHOICES, "failed")
    return SummaryFilter(
        **{name: query_text(req, name) for name in FILTERS}, status=status_filter(status)
    )


def _only(document: dict[str, Any], fields: tuple[str, ...]) -> None:
    unknown = sorted(set(document) - set(fields))
    if unknown:
        raise InvalidInput(unknown[0], f"is not a field; use {', '.join(fields)}")


def _text(document: dict[str, Any], name: str) -> str | None:
    value = document.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(name, "must be a string")
    if name in FILTERS and len(value) > MAX_FILTER_LENGTH:
        raise InvalidInput(name, f"must be at most {MAX_FILTER_LENGTH} characters")
    return value.strip() or None
