"""HTTP API of failed sessions: list them, group them, inspect one, replay one."""

from __future__ import annotations

from dataclasses import asdict

import azure.functions as func

from ..bootstrap import container
from ..domain.archive import STATUS_CHOICES, SummaryFilter, status_filter
from ..service_layer import failed_sessions as sessions
from ..service_layer.replay import replay_session
from .http import FUNCTION_KEY, api_route, endpoint, json_response
from .http_input import (
    MAX_TOKEN_LENGTH,
    check_body_size,
    query_choice,
    query_flag,
    query_int,
    query_text,
    required_header_key,
    route_value,
)
from .views import replay_status_url, replay_view, row_view, session_view

bp = func.Blueprint()

MAX_REPLAY_BODY_BYTES = 4096  # the route reads no body; a client may send an empty object


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
            "items": [session_view(summary) for summary in page.items],
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
    return json_response(200, {**session_view(summary), "messages": [row_view(r) for r in rows]})


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
    same key gets the first response; 404 unknown, 409 incomplete or in flight."""
    session_id = route_value(req, "session_id")
    key = required_header_key(req)
    force = query_flag(req, "force")
    check_body_size(req, max_bytes=MAX_REPLAY_BODY_BYTES)
    c = container()
    result = replay_session(
        c.archive,
        c.resender,
        c.session_seeder,
        session_id,
        key,
        force=force,
        requests=c.idempotent_requests,
    )
    return json_response(
        202, replay_view(req, result), headers={"Location": replay_status_url(req, result)}
    )


def _status(req: func.HttpRequest) -> str | None:
    return status_filter(query_choice(req, "status", STATUS_CHOICES, "failed"))
