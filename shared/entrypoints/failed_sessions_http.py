"""HTTP API of failed sessions, every route over them in one place: list, group and inspect
them, find their root causes (fingerprints), read a session's history, replay one (as
archived, or with edited messages), resolve one without a replay, and act on many: a bulk
replay or resolution through a preview and a confirmation token, or a bulk replay by filter,
run in the background by the replay queue's trigger (``replay_queue``) and followed here.

Every action on one session goes through the operator desk (``Container.operator_desk``), as
the console's do: each is audited (who, when, why), the API's caller named by its function
key's digest."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import azure.functions as func

from ..bootstrap import container
from ..bootstrap.operator_desk import Ask
from ..domain.archive import STATUS_CHOICES, SummaryFilter, status_filter
from ..domain.confirmations import Selection
from ..domain.errors import InvalidInput
from ..service_layer import failed_sessions as sessions
from ..service_layer.bulk_actions import bulk_action
from ..service_layer.bulk_replay import get_bulk_replay, request_bulk_replay
from ..service_layer.fingerprints import failure_fingerprints, sessions_with_fingerprint
from ..service_layer.history import session_history
from . import views
from .http import FUNCTION_KEY, api_route, endpoint, json_response
from .http_input import (
    MAX_FILTER_LENGTH,
    MAX_TOKEN_LENGTH,
    caller,
    check_body_size,
    json_body,
    query_choice,
    query_flag,
    query_int,
    query_text,
    request_id_of,
    required_header_key,
    route_value,
)
from .operator_views import history_view, preview_view, resolution_view

bp = func.Blueprint()

MAX_REPLAY_BODY_BYTES = 4096  # the route reads no body; a client may send an empty object
MAX_EDIT_BODY_BYTES = 1024 * 1024  # a session's edited messages, each at most 256 KiB
MAX_NOTE_BODY_BYTES = 16 * 1024
MAX_BULK_REPLAY_BODY_BYTES = 4096
FILTERS = ("queue", "task", "reason")


@bp.route(route=api_route("failed-sessions"), methods=["GET"], auth_level=FUNCTION_KEY)
@endpoint
def list_failed_sessions(req: func.HttpRequest) -> func.HttpResponse:
    """Failed sessions, filtered by queue, task, reason and status ("failed" by default,
    "replayed", "resolved", "any"); paged with an opaque continuation token."""
    page = sessions.list_failed_sessions(
        container().archive,
        SummaryFilter(
            queue=query_text(req, "queue"),
            task=query_text(req, "task"),
            reason=query_text(req, "reason"),
            status=_status(req),
        ),
        page_size=query_int(req, "page_size", default=50, low=1, high=sessions.MAX_PAGE_SIZE),
        continuation=query_text(req, "continuation", max_length=MAX_TOKEN_LENGTH),
    )
    return json_response(
        200,
        {
            "items": [views.session_view(summary) for summary in page.items],
            "continuation": page.continuation,
        },
    )


@bp.route(route=api_route("failed-session-groups"), methods=["GET"], auth_level=FUNCTION_KEY)
@endpoint
def failed_session_groups(req: func.HttpRequest) -> func.HttpResponse:
    """Counts of failed sessions by (queue, failed task, reason), largest first."""
    groups = sessions.group_failed_sessions(
        container().archive, status=_status(req), queue=query_text(req, "queue")
    )
    return json_response(200, {"groups": [asdict(group) for group in groups]})


@bp.route(
    route=api_route("failed-sessions/{session_id}"),
    methods=["GET"],
    auth_level=FUNCTION_KEY,
)
@endpoint
def get_failed_session(req: func.HttpRequest) -> func.HttpResponse:
    """One failed session and its archived messages in send order; 404 when none are archived."""
    summary, rows = sessions.get_failed_session(container().archive, route_value(req, "session_id"))
    view = {**views.session_view(summary), "messages": [views.row_view(r) for r in rows]}
    return json_response(200, view)


@bp.route(
    route=api_route("failed-sessions/{session_id}/replay"),
    methods=["POST"],
    auth_level=FUNCTION_KEY,
)
@endpoint
def replay_failed_session(req: func.HttpRequest) -> func.HttpResponse:
    """Send the session's archived messages again, in order, under a new session id derived
    from the Idempotency-Key: 202 with that id and a Location to follow the replayed work.
    One replay per session: 409 names the replay that claimed it first. A repeat with the
    same key gets the first response; 404 unknown, 409 incomplete or in flight. Audited as
    the console's replay, without a note (the route reads no body)."""
    session_id = route_value(req, "session_id")
    key = required_header_key(req)
    force = query_flag(req, "force")
    check_body_size(req, max_bytes=MAX_REPLAY_BODY_BYTES)
    ask = Ask(key, caller(req), None)
    result = container().operator_desk.replay(session_id, ask, force=force)
    return json_response(
        202,
        views.replay_view(req, result),
        headers={"Location": views.replay_status_url(req, result)},
    )


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


BULK_REPLAY_EXAMPLE = '{"task": "ProcessPayment", "reason": "PaymentProviderUnavailable"}'


@bp.route(route=api_route("replays"), methods=["POST"], auth_level=FUNCTION_KEY)
@endpoint
def request_replay(req: func.HttpRequest) -> func.HttpResponse:
    """Replay every failed session that failed at a task and/or with a reason, in the
    background (through a storage queue): 202 with the status URL of the request."""
    document = json_body(req, max_bytes=MAX_BULK_REPLAY_BODY_BYTES, example=BULK_REPLAY_EXAMPLE)
    unknown = sorted(set(document) - set(FILTERS))
    if unknown:
        raise InvalidInput(unknown[0], f"is not a field; use {', '.join(FILTERS)}")
    selection = Selection(**{name: _optional_text(document, name) for name in FILTERS})
    c = container()
    request = request_bulk_replay(c.replay_requests, c.replay_queue, selection)
    status_url = views.replay_request_url(req, request.request_id)
    return json_response(
        202,
        {**views.request_view(request), "status_url": status_url},
        headers={"Location": status_url},
    )


@bp.route(route=api_route("replays/{request_id}"), methods=["GET"], auth_level=FUNCTION_KEY)
@endpoint
def get_replay(req: func.HttpRequest) -> func.HttpResponse:
    """Progress of a bulk replay (or resolution): status, sessions found, sent (resolved),
    taken by another replay or resolution, and failed (with the first errors); ``failure``
    says why when it ended in the poison queue."""
    request_id = request_id_of(route_value(req, "request_id"))
    return json_response(
        200, views.request_view(get_bulk_replay(container().replay_requests, request_id))
    )


def _status(req: func.HttpRequest) -> str | None:
    return status_filter(query_choice(req, "status", STATUS_CHOICES, "failed"))


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


def _optional_text(document: dict[str, object], name: str) -> str | None:
    value = document.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(name, "must be a non-empty string")
    if len(value) > MAX_FILTER_LENGTH:
        raise InvalidInput(name, f"must be at most {MAX_FILTER_LENGTH} characters")
    return value.strip()
