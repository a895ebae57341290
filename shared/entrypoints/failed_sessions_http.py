"""HTTP API of failed sessions one at a time: list, group and inspect them (by queue, task,
reason, status and the time they failed), find their root causes (fingerprints), read a
session's history, replay one (as archived, or with edited messages), resolve one without a
replay. Acting on many at once: ``bulk_http``; exporting them: ``exports_http``.

Every action on one session goes through the operator desk (``Container.operator_desk``), as
the console's do: each is audited (who, with which role, when, why), the API's caller named by
its function key's digest. Each route declares the least role it needs (``@requires``):
Reader reads, Operator replays and resolves, Editor edits."""

from __future__ import annotations

import json
from dataclasses import asdict

import azure.functions as func

from ..bootstrap import container
from ..domain.errors import InvalidInput
from ..domain.roles import Role
from ..service_layer import failed_sessions as sessions
from ..service_layer.fingerprints import failure_fingerprints, sessions_with_fingerprint
from ..service_layer.history import session_history
from . import views
from .http import FUNCTION_KEY, api_route, endpoint, json_response
from .http_input import (
    MAX_TOKEN_LENGTH,
    check_body_size,
    json_body,
    query_flag,
    query_int,
    query_text,
    required_header_key,
    route_value,
)
from .operator_input import ask_of, only_fields, selected, status_of, text_field
from .operator_views import history_view, resolution_view
from .roles import requires

bp = func.Blueprint()

MAX_REPLAY_BODY_BYTES = 4096  # the route reads no body; a client may send an empty object
MAX_EDIT_BODY_BYTES = 1024 * 1024  # a session's edited messages, each at most 256 KiB
MAX_NOTE_BODY_BYTES = 16 * 1024


@bp.route(route=api_route("failed-sessions"), methods=["GET"], auth_level=FUNCTION_KEY)
@endpoint
@requires(Role.READER)
def list_failed_sessions(req: func.HttpRequest) -> func.HttpResponse:
    """Failed sessions, filtered by queue, task, reason, status ("failed" by default,
    "replayed", "resolved", "any") and when they failed (``failed_from``, ``failed_to``);
    paged with an opaque continuation token."""
    page = sessions.list_failed_sessions(
        container().archive,
        selected(req),
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
@requires(Role.READER)
def failed_session_groups(req: func.HttpRequest) -> func.HttpResponse:
    """Counts of failed sessions by (queue, failed task, reason), largest first."""
    groups = sessions.group_failed_sessions(
        container().archive, status=status_of(req), queue=query_text(req, "queue")
    )
    return json_response(200, {"groups": [asdict(group) for group in groups]})


@bp.route(
    route=api_route("failed-sessions/{session_id}"),
    methods=["GET"],
    auth_level=FUNCTION_KEY,
)
@endpoint
@requires(Role.READER)
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
@requires(Role.OPERATOR)
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
    ask = ask_of(req, key, None)
    c = container()
    result = c.operator_desk.replay(session_id, ask, force=force)
    return json_response(
        202,
        views.replay_view(req, result, c.pipelines.declared),
        headers={"Location": views.replay_status_url(req, result, c.pipelines.declared)},
    )


@bp.route(route=api_route("failed-session-fingerprints"), methods=["GET"], auth_level=FUNCTION_KEY)
@endpoint
@requires(Role.READER)
def failed_session_fingerprints(req: func.HttpRequest) -> func.HttpResponse:
    """The root causes of the sessions chosen by queue, task, reason and status: sessions
    whose descriptions match once ids, numbers and amounts are set aside, most first."""
    found = failure_fingerprints(container().archive, selected(req))
    return json_response(200, {"fingerprints": [asdict(f) for f in found]})


@bp.route(
    route=api_route("failed-session-fingerprints/{fingerprint}"),
    methods=["GET"],
    auth_level=FUNCTION_KEY,
)
@endpoint
@requires(Role.READER)
def failed_session_fingerprint(req: func.HttpRequest) -> func.HttpResponse:
    """Every session (chosen as above) of one root cause."""
    wanted = route_value(req, "fingerprint")
    found = sessions_with_fingerprint(container().archive, wanted, selected(req))
    return json_response(
        200, {"fingerprint": wanted, "items": [views.session_view(s) for s in found]}
    )


@bp.route(
    route=api_route("failed-sessions/{session_id}/history"),
    methods=["GET"],
    auth_level=FUNCTION_KEY,
)
@endpoint
@requires(Role.READER)
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
@requires(Role.EDITOR)
def edit_and_replay_session(req: func.HttpRequest) -> func.HttpResponse:
    """Replay the session with some messages' bodies replaced, each checked like the
    original; the archive keeps the originals; a note is required. Idempotency-Key rules as
    for a replay. 202 like a replay, with a Location to follow the replayed work."""
    session_id = route_value(req, "session_id")
    key = required_header_key(req)
    document = json_body(req, max_bytes=MAX_EDIT_BODY_BYTES, example=EDIT_EXAMPLE)
    only_fields(document, ("messages", "note"))
    messages = document.get("messages")
    if not isinstance(messages, dict) or not messages:
        raise InvalidInput("messages", "must map row keys to the edited message bodies")
    edited = {str(k): json.dumps(v, ensure_ascii=False) for k, v in messages.items()}
    ask = ask_of(req, key, text_field(document, "note"))
    c = container()
    result = c.operator_desk.edit_and_replay(session_id, edited, ask)
    return json_response(
        202,
        views.replay_view(req, result, c.pipelines.declared),
        headers={"Location": views.replay_status_url(req, result, c.pipelines.declared)},
    )


EDIT_EXAMPLE = '{"note": "currency typo", "messages": {"00000000000000000003": {...}}}'


@bp.route(
    route=api_route("failed-sessions/{session_id}/resolve"),
    methods=["POST"],
    auth_level=FUNCTION_KEY,
)
@endpoint
@requires(Role.OPERATOR)
def resolve_failed_session(req: func.HttpRequest) -> func.HttpResponse:
    """Mark the session resolved without a replay, with a required note: it leaves the
    default list and no later replay sends it. Idempotency-Key rules as for a replay; 409
    when another request replayed or resolved it first."""
    session_id = route_value(req, "session_id")
    key = required_header_key(req)
    document = json_body(req, max_bytes=MAX_NOTE_BODY_BYTES, example='{"note": "duplicate"}')
    only_fields(document, ("note",))
    ask = ask_of(req, key, text_field(document, "note"))
    resolution = container().operator_desk.resolve(session_id, ask)
    view = {
        **resolution_view(resolution),
        "failed_session_url": views.failed_session_url(req, session_id),
    }
    return json_response(200, view)
