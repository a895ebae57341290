"""HTTP API of what a Reader takes away: the failed sessions a filter chooses as CSV, and the
operators' audit trail (every session's, by the time it was recorded) as JSON or CSV."""

from __future__ import annotations

import azure.functions as func

from ..bootstrap import container
from ..domain.roles import Role
from ..service_layer.exports import audit_entries, export_failed_sessions
from .csv_views import audit_csv, csv_response, sessions_csv
from .http import FUNCTION_KEY, api_route, endpoint, json_response
from .http_input import query_window
from .operator_input import selected
from .operator_views import audit_entry_view
from .roles import requires

bp = func.Blueprint()
AUDIT_WINDOW = ("from", "to")


@bp.route(route=api_route("exports/failed-sessions"), methods=["GET"], auth_level=FUNCTION_KEY)
@endpoint
@requires(Role.READER)
def export_failed_sessions_csv(req: func.HttpRequest) -> func.HttpResponse:
    """Every failed session the filter chooses (as ``GET /api/failed-sessions`` takes it:
    queue, task, reason, status, failed_from, failed_to), one CSV row each, by when it
    failed; 400 past 10,000 sessions, naming the window to narrow."""
    found = export_failed_sessions(container().archive, selected(req))
    return csv_response(sessions_csv(found), "failed-sessions.csv")


@bp.route(route=api_route("audit"), methods=["GET"], auth_level=FUNCTION_KEY)
@endpoint
@requires(Role.READER)
def get_audit(req: func.HttpRequest) -> func.HttpResponse:
    """What operators did, every session's, recorded in ``[from, to)`` (ISO 8601 times;
    either end may be left open), oldest first: who, with which role, when, why."""
    start, end = query_window(req, AUDIT_WINDOW)
    entries = audit_entries(container().audit_trail, start, end)
    return json_response(200, {"entries": [audit_entry_view(e) for e in entries]})


@bp.route(route=api_route("exports/audit"), methods=["GET"], auth_level=FUNCTION_KEY)
@endpoint
@requires(Role.READER)
def export_audit_csv(req: func.HttpRequest) -> func.HttpResponse:
    """The same entries as ``GET /api/audit``, as CSV."""
    start, end = query_window(req, AUDIT_WINDOW)
    entries = audit_entries(container().audit_trail, start, end)
    return csv_response(audit_csv(entries), "audit.csv")
