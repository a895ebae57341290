"""What a Reader reads and takes away from the console: the operators' audit trail of a time
window, and the CSV exports of failed sessions (the sessions page's filter applied) and of the
audit trail (``shared.entrypoints.csv_views``), as the API exports them."""

from __future__ import annotations

from datetime import timedelta

import azure.functions as func

from ...bootstrap import container
from ...domain.archive import STATUS_CHOICES, SummaryFilter, status_filter
from ...domain.retention import iso
from ...service_layer.clock import utc_now
from ...service_layer.exports import audit_entries, export_failed_sessions
from ..csv_views import audit_csv, csv_response, sessions_csv
from ..http_input import query_text
from .frame import ANONYMOUS, Visit, choice, console_view
from .pages import WINDOW, console_window

bp = func.Blueprint()
AUDIT_WINDOW = ("from", "to")
AUDIT_PAGE_MAX = 1000  # entries the page shows; the export takes up to 10,000
AUDIT_PAGE_DAYS = 7  # the window the page shows when it names none


@bp.route(route="console/audit", methods=["GET"], auth_level=ANONYMOUS)
@console_view
def console_audit(visit: Visit) -> func.HttpResponse:
    """Every operator action recorded in the window (the last 7 days unless it says), oldest
    first: when, who, with which role, on which session, why."""
    start, end = console_window(visit, AUDIT_WINDOW)
    if start is None and end is None:
        start = iso(utc_now() - timedelta(days=AUDIT_PAGE_DAYS))
    entries = audit_entries(container().audit_trail, start, end, up_to=AUDIT_PAGE_MAX)
    return visit.page("audit.html", entries=entries, start=start or "", end=end or "")


@bp.route(route="console/exports/audit", methods=["GET"], auth_level=ANONYMOUS)
@console_view
def console_export_audit(visit: Visit) -> func.HttpResponse:
    start, end = console_window(visit, AUDIT_WINDOW)
    entries = audit_entries(container().audit_trail, start, end)
    return csv_response(audit_csv(entries), "audit.csv")


@bp.route(route="console/exports/failed-sessions", methods=["GET"], auth_level=ANONYMOUS)
@console_view
def console_export_sessions(visit: Visit) -> func.HttpResponse:
    """The sessions the sessions page's filter chooses (queue, task, reason, status and the
    window of failure times), as CSV."""
    status = choice(visit.req.params.get("status"), STATUS_CHOICES, "failed")
    filters = {name: query_text(visit.req, name) for name in ("queue", "task", "reason")}
    window = dict(zip(WINDOW, console_window(visit, WINDOW), strict=True))
    selected = SummaryFilter(**filters, status=status_filter(status), **window)
    return csv_response(
        sessions_csv(export_failed_sessions(container().archive, selected)), "failed-sessions.csv"
    )
