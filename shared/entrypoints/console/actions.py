"""The console's actions on failed sessions: each a POST carrying the page's CSRF token (checked
by ``console_view``) and an action id, carried out by one service and answered with a redirect
to the page that shows its outcome (or an error page saying why not)."""

from __future__ import annotations

import uuid
from urllib.parse import quote

import azure.functions as func

from ...bootstrap import container
from ...console import views
from ...domain.errors import InvalidInput
from ...service_layer.failed_sessions import get_failed_session
from ...service_layer.operator_actions import edit_and_replay, replay_for_operator
from ..http_input import route_value
from .frame import ANONYMOUS, Visit, console_view, redirect

bp = func.Blueprint()


@bp.route(route="console/sessions/{session_id}/replay", methods=["POST"], auth_level=ANONYMOUS)
@console_view
def console_replay(visit: Visit) -> func.HttpResponse:
    session_id = route_value(visit.req, "session_id")
    c = container()
    result = replay_for_operator(
        c.archive,
        c.resender,
        c.session_seeder,
        c.audit_trail,
        session_id,
        action_id=visit.form.get("action_id", ""),
        who=visit.operator.name,
        note=visit.form.get("note", ""),
    )
    page = f"{visit.base}/sessions/{quote(session_id, safe='')}"
    return redirect(f"{page}?replayed={quote(result.new_session_id, safe='')}")


@bp.route(route="console/sessions/{session_id}/edit", methods=["GET", "POST"], auth_level=ANONYMOUS)
@console_view
def console_edit(visit: Visit) -> func.HttpResponse:
    """The session's messages as editable JSON; sent, the edited ones are checked like the
    originals and the session is replayed with them (a note says why)."""
    session_id = route_value(visit.req, "session_id")
    c = container()
    summary, rows = get_failed_session(c.archive, session_id)
    edited = {k[len(BODY) :]: v for k, v in visit.form.items() if k.startswith(BODY)}
    error = None
    if visit.req.method == "POST":
        try:
            result = edit_and_replay(
                c.archive,
                c.resender,
                c.session_seeder,
                c.audit_trail,
                session_id,
                edited,
                action_id=visit.form.get("action_id", ""),
                who=visit.operator.name,
                note=visit.form.get("note"),
            )
        except InvalidInput as invalid:
            error = invalid
        else:
            page = views.session_path(visit.base, session_id)
            return redirect(f"{page}?replayed={quote(result.new_session_id, safe='')}")
    return visit.page(
        "edit.html",
        http_status=400 if error else 200,
        nav="failures",
        summary=summary,
        entries=views.timeline(rows),
        edited=edited,
        note=visit.form.get("note", ""),
        error=error,
        action_id=visit.form.get("action_id") or uuid.uuid4().hex,
        session_path=views.session_path,
        body_field=BODY,
    )


BODY = "body:"
