"""Bulk replays and resolutions from the console: a preview (how many sessions of which groups,
chosen by task, reason and the window of time they failed in, and a token), a confirmation
with a note, then the request's progress, refreshed in place. Previewing and confirming need
the role Operator (``console_view``'s rule for a POST)."""

from __future__ import annotations

import azure.functions as func

from ...bootstrap import container
from ...domain.confirmations import Selection
from ...domain.time_windows import time_window
from ...service_layer.bulk_actions import bulk_action
from ...service_layer.bulk_replay import get_bulk_replay
from ..http_input import request_id_of, route_value
from .frame import ANONYMOUS, Visit, console_view, redirect

bp = func.Blueprint()


@bp.route(route="console/bulk/preview", methods=["POST"], auth_level=ANONYMOUS)
@console_view
def console_bulk_preview(visit: Visit) -> func.HttpResponse:
    failed_from, failed_to = time_window(
        visit.form.get("failed_from") or None,
        visit.form.get("failed_to") or None,
        assume_utc=True,
    )
    selection = Selection(
        **{k: visit.form.get(k) or None for k in ("queue", "task", "reason")},
        failed_from=failed_from,
        failed_to=failed_to,
    )
    action = bulk_action(visit.form.get("action"))
    preview = container().operator_desk.preview_bulk(action, selection)
    return visit.page("bulk_preview.html", preview=preview, note="")


@bp.route(route="console/bulk", methods=["POST"], auth_level=ANONYMOUS)
@console_view
def console_bulk_confirm(visit: Visit) -> func.HttpResponse:
    request = container().operator_desk.confirm_bulk(
        bulk_action(visit.form.get("action")),
        visit.form.get("token", ""),
        who=visit.operator.name,
        note=visit.form.get("note"),
        role=visit.operator.caller.role_label,
    )
    return redirect(f"{visit.base}/bulk/{request.request_id}")


@bp.route(route="console/bulk/{request_id}", methods=["GET"], auth_level=ANONYMOUS)
@console_view
def console_bulk_progress(visit: Visit) -> func.HttpResponse:
    request_id = request_id_of(route_value(visit.req, "request_id"))
    request = get_bulk_replay(container().replay_requests, request_id)
    return visit.page("bulk_progress.html", request=request)
