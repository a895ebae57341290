"""The console's read-only pages: the overview, failure groups, their sessions, a session's
timeline. Each calls one service and renders one template."""

from __future__ import annotations

import uuid

import azure.functions as func

from ...bootstrap import container
from ...console import views
from ...domain.archive import SummaryFilter
from ...service_layer.failed_sessions import (
    MAX_PAGE_SIZE,
    get_failed_session,
    group_failed_sessions,
    list_failed_sessions,
)
from ...service_layer.fingerprints import failure_fingerprints, sessions_with_fingerprint
from ...service_layer.operator_actions import history
from ...service_layer.overview import WAITING_COUNT_MAX, overview
from ..http_input import route_value
from .frame import ANONYMOUS, Visit, choice, console_view

bp = func.Blueprint()

STATUSES = ("failed", "replayed", "any")


@bp.route(route="console", methods=["GET"], auth_level=ANONYMOUS)
@console_view
def console_overview(visit: Visit) -> func.HttpResponse:
    c = container()
    now = overview(c.archive, c.dead_letter_counter, c.session_queues)
    return visit.page(
        "overview.html",
        nav="overview",
        overview=now,
        groups=now.groups,
        waiting_max=WAITING_COUNT_MAX,
        query=views.sessions_query,
    )


@bp.route(route="console/failures", methods=["GET"], auth_level=ANONYMOUS)
@console_view
def console_failures(visit: Visit) -> func.HttpResponse:
    status = choice(visit.req.params.get("status"), STATUSES, "failed")
    groups = group_failed_sessions(container().archive, status=None if status == "any" else status)
    return visit.page(
        "failures.html", nav="failures", groups=groups, status=status, query=views.sessions_query
    )


@bp.route(route="console/sessions", methods=["GET"], auth_level=ANONYMOUS)
@console_view
def console_sessions(visit: Visit) -> func.HttpResponse:
    """A group's root causes (fingerprints) and its sessions, or one root cause's sessions."""
    params = visit.req.params
    status = choice(params.get("status"), STATUSES, "failed")
    filters = {name: params.get(name) or None for name in ("queue", "task", "reason")}
    selected = SummaryFilter(**filters, status=None if status == "any" else status)
    archive = container().archive
    wanted = params.get("fingerprint") or None
    causes = failure_fingerprints(archive, selected)
    if wanted:
        sessions, continuation = sessions_with_fingerprint(archive, wanted, selected), None
    else:
        page = list_failed_sessions(
            archive,
            selected,
            page_size=MAX_PAGE_SIZE,
            continuation=params.get("continuation") or None,
        )
        sessions, continuation = page.items, page.continuation
    return visit.page(
        "sessions.html",
        nav="failures",
        sessions=sessions,
        continuation=continuation,
        causes=causes,
        fingerprint=wanted,
        filters=filters,
        status=status,
        query=views.sessions_query,
        session_path=views.session_path,
    )


@bp.route(route="console/sessions/{session_id}", methods=["GET"], auth_level=ANONYMOUS)
@console_view
def console_session(visit: Visit) -> func.HttpResponse:
    session_id = route_value(visit.req, "session_id")
    c = container()
    summary, rows = get_failed_session(c.archive, session_id)
    return visit.page(
        "session.html",
        nav="failures",
        summary=summary,
        context=views.context_items(summary),
        entries=views.timeline(rows),
        history=history(c.audit_trail, session_id),
        action_id=uuid.uuid4().hex,
        session_path=views.session_path,
        query=views.sessions_query,
    )
