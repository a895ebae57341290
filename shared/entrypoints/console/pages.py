"""The console's read-only pages: the overview, failure groups, their sessions, a session's
timeline and history, an order found by job id or order number, an import job's progress.
Each calls the services and renders one template."""

from __future__ import annotations

import uuid

import azure.functions as func

from ...bootstrap import container
from ...domain.archive import STATUS_CHOICES, SummaryFilter, status_filter
from ...domain.errors import NotFound
from ...domain.time_windows import time_window
from ...service_layer import failed_sessions
from ...service_layer.fingerprints import failure_fingerprints, sessions_with_fingerprint
from ...service_layer.history import session_history
from ...service_layer.imports import get_import_status
from ...service_layer.overview import ORDERS_COUNTED_MAX, WAITING_COUNT_MAX, overview
from ...service_layer.ports import Page
from ..http_input import MAX_ID_LENGTH, query_text, route_value
from . import views
from .frame import ANONYMOUS, Visit, choice, console_view

bp = func.Blueprint()


@bp.route(route="console", methods=["GET"], auth_level=ANONYMOUS)
@console_view
def console_overview(visit: Visit) -> func.HttpResponse:
    c = container()
    now = overview(c.overview_sources, c.session_queues, pipelines=c.settings.queues, gates=c.gates)
    return visit.page(
        "overview.html",
        overview=now,
        groups=now.groups,
        waiting_max=WAITING_COUNT_MAX,
        orders_max=ORDERS_COUNTED_MAX,
        hold_minutes=round(c.settings.task_hold_seconds / 60),
    )


@bp.route(route="console/failures", methods=["GET"], auth_level=ANONYMOUS)
@console_view
def console_failures(visit: Visit) -> func.HttpResponse:
    status = choice(visit.req.params.get("status"), STATUS_CHOICES, "failed")
    groups = failed_sessions.group_failed_sessions(
        container().archive, status=status_filter(status)
    )
    return visit.page("failures.html", groups=groups, status=status)


@bp.route(route="console/sessions", methods=["GET"], auth_level=ANONYMOUS)
@console_view
def console_sessions(visit: Visit) -> func.HttpResponse:
    """A group's root causes (fingerprints) and its sessions, or one root cause's sessions."""
    params = visit.req.params
    status = choice(params.get("status"), STATUS_CHOICES, "failed")
    filters = {name: query_text(visit.req, name) for name in ("queue", "task", "reason")}
    window = dict(zip(WINDOW, console_window(visit, WINDOW), strict=True))
    selected = SummaryFilter(**filters, status=status_filter(status), **window)
    archive = container().archive
    wanted = query_text(visit.req, "fingerprint")
    causes = failure_fingerprints(archive, selected)
    if wanted:
        page = Page(sessions_with_fingerprint(archive, wanted, selected))
    else:
        page = failed_sessions.list_failed_sessions(
            archive,
            selected,
            page_size=failed_sessions.MAX_PAGE_SIZE,
            continuation=params.get("continuation") or None,
        )
    return visit.page(
        "sessions.html",
        page=page,
        causes=causes,
        fingerprint=wanted,
        filters=filters,
        window=window,
        linked={**filters, **window},  # what the page's links carry on
        status=status,
    )


WINDOW = ("failed_from", "failed_to")


def console_window(visit: Visit, names: tuple[str, str]) -> tuple[str | None, str | None]:
    """A time window from the page's query: ISO 8601 times, UTC unless they say otherwise
    (the form's fields say so)."""
    return time_window(
        query_text(visit.req, names[0], max_length=64),
        query_text(visit.req, names[1], max_length=64),
        names=names,
        assume_utc=True,
    )


@bp.route(route="console/sessions/{session_id}", methods=["GET"], auth_level=ANONYMOUS)
@console_view
def console_session(visit: Visit) -> func.HttpResponse:
    """A session's failure, its history (each replay with its outcome, refreshed while one is
    in progress) and its timeline; the actions an operator may take on it."""
    session_id = route_value(visit.req, "session_id")
    c = container()
    summary, rows = failed_sessions.get_failed_session(c.archive, session_id)
    history = session_history(c.archive, c.audit_trail, c.replay_progress, session_id)
    return visit.page(
        "session.html",
        summary=summary,
        context=views.context_items(summary),
        entries=views.timeline(rows),
        history=history,
        in_progress=any(r.outcome == "in progress" for r in history.replays),
        action_id=uuid.uuid4().hex,
    )


@bp.route(route="console/orders", methods=["GET"], auth_level=ANONYMOUS)
@console_view
def console_order(visit: Visit) -> func.HttpResponse:
    """An order found by its job id or its order number: where it stands, and its replays;
    refreshed while it runs."""
    reference = query_text(visit.req, "ref", max_length=MAX_ID_LENGTH)
    order, missing = None, None
    if reference:
        try:
            order = container().order_lookup.find(reference)
        except NotFound as error:
            missing = str(error)
    return visit.page(
        "order.html",
        http_status=404 if missing else 200,
        reference=reference or "",
        order=order,
        missing=missing,
    )


@bp.route(route="console/imports/{job_id}", methods=["GET"], auth_level=ANONYMOUS)
@console_view
def console_import(visit: Visit) -> func.HttpResponse:
    """An import job's progress, refreshed until every row is imported or failed."""
    c = container()
    status = get_import_status(
        c.import_manifests, c.import_progress, route_value(visit.req, "job_id")
    )
    return visit.page("import.html", job=status)
