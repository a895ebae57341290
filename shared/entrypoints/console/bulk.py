"""Bulk replay from the console: a preview (how many sessions of which groups, and a token),
a confirmation with a note, then the request's progress, refreshed in place."""

from __future__ import annotations

import uuid

import azure.functions as func

from ...bootstrap import container
from ...domain.confirmations import Selection
from ...domain.replays import ReplayRequestNotFound
from ...service_layer.bulk_actions import confirm_bulk_replay, preview_bulk_replay
from ..http_input import route_value
from .frame import ANONYMOUS, Visit, console_view, error_page, redirect

bp = func.Blueprint()


@bp.route(route="console/bulk-replay/preview", methods=["POST"], auth_level=ANONYMOUS)
@console_view
def console_bulk_replay_preview(visit: Visit) -> func.HttpResponse:
    selection = Selection(**{k: visit.form.get(k) or None for k in ("queue", "task", "reason")})
    preview = preview_bulk_replay(container().archive, container().confirmations, selection)
    return visit.page("bulk_preview.html", nav="failures", preview=preview, note="")


@bp.route(route="console/bulk-replay", methods=["POST"], auth_level=ANONYMOUS)
@console_view
def console_bulk_replay(visit: Visit) -> func.HttpResponse:
    c = container()
    request = confirm_bulk_replay(
        c.archive,
        c.confirmations,
        c.replay_requests,
        c.replay_queue,
        c.audit_trail,
        visit.form.get("token", ""),
        who=visit.operator.name,
        note=visit.form.get("note"),
    )
    return redirect(f"{visit.base}/replays/{request.request_id}")


@bp.route(route="console/replays/{request_id}", methods=["GET"], auth_level=ANONYMOUS)
@console_view
def console_replay_progress(visit: Visit) -> func.HttpResponse:
    request_id = route_value(visit.req, "request_id")
    try:
        uuid.UUID(request_id)
        request = container().replay_requests.get(request_id)
    except (ValueError, ReplayRequestNotFound):
        return error_page(visit, 404, "Unknown bulk replay", f"No bulk replay {request_id!r}.")
    return visit.page("replay_progress.html", nav="failures", request=request)
