"""The console's actions on one failed session: each a POST carrying the page's CSRF token
(checked by ``console_view``, with the operator's role: Operator to replay or resolve, Editor
to edit) and an action id (the request's Idempotency-Key), carried out by one service and
answered with a redirect to the session's page, which shows the outcome (or an error page
saying why not)."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import azure.functions as func

from ...bootstrap import container
from ...bootstrap.operator_desk import Ask, OperatorDesk
from ...domain.errors import InvalidInput
from ...domain.roles import Role
from ...service_layer.failed_sessions import get_failed_session
from ...service_layer.operator_actions import console_key
from ..http_input import route_value
from ..roles import requires
from . import views
from .frame import ANONYMOUS, Visit, console_view, redirect

bp = func.Blueprint()
BODY = "body:"  # the form field of an edited body: body:<row key>


@bp.route(route="console/sessions/{session_id}/replay", methods=["POST"], auth_level=ANONYMOUS)
@console_view
def console_replay(visit: Visit) -> func.HttpResponse:
    return _act_on_session(visit, OperatorDesk.replay)


@bp.route(route="console/sessions/{session_id}/edit", methods=["GET", "POST"], auth_level=ANONYMOUS)
@console_view
@requires(Role.EDITOR)
def console_edit(visit: Visit) -> func.HttpResponse:
    """The session's messages as editable JSON; sent, the edited ones are checked like the
    originals and the session is replayed with them (a note says why)."""
    session_id = route_value(visit.req, "session_id")
    desk = container().operator_desk
    summary, rows = get_failed_session(desk.archive, session_id)
    edited = {k[len(BODY) :]: v for k, v in visit.form.items() if k.startswith(BODY)}
    error = None
    if visit.req.method == "POST":
        try:
            desk.edit_and_replay(session_id, edited, _ask(visit))
        except InvalidInput as invalid:
            error = invalid
        else:
            return redirect(views.session_path(visit.base, session_id))
    return visit.page(
        "edit.html",
        http_status=400 if error else 200,
        summary=summary,
        entries=views.timeline(rows),
        edited=edited,
        note=visit.form.get("note", ""),
        error=error,
        action_id=visit.form.get("action_id") or uuid.uuid4().hex,
        body_field=BODY,
    )


@bp.route(route="console/sessions/{session_id}/resolve", methods=["POST"], auth_level=ANONYMOUS)
@console_view
def console_resolve(visit: Visit) -> func.HttpResponse:
    """Resolve the session without a replay, with a required note."""
    return _act_on_session(visit, OperatorDesk.resolve)


@bp.route(route="console/pipelines/{pipeline}/pause", methods=["POST"], auth_level=ANONYMOUS)
@console_view
def console_pause(visit: Visit) -> func.HttpResponse:
    """Pause a pipeline, with a required note; then the overview, which shows it paused."""
    pipeline = route_value(visit.req, "pipeline")
    container().pipeline_controls.pause(
        pipeline,
        who=visit.operator.name,
        note=visit.form.get("note"),
        role=visit.operator.caller.role_label,
    )
    return redirect(visit.base)


@bp.route(route="console/pipelines/{pipeline}/resume", methods=["POST"], auth_level=ANONYMOUS)
@console_view
def console_resume(visit: Visit) -> func.HttpResponse:
    """End an operator's pause of a pipeline, with a required note; then the overview."""
    pipeline = route_value(visit.req, "pipeline")
    container().pipeline_controls.resume(
        pipeline,
        who=visit.operator.name,
        note=visit.form.get("note"),
        role=visit.operator.caller.role_label,
    )
    return redirect(visit.base)


def _act_on_session(
    visit: Visit, act: Callable[[OperatorDesk, str, Ask], object]
) -> func.HttpResponse:
    """Carry out the form's action on the route's session, then show the session's page."""
    session_id = route_value(visit.req, "session_id")
    act(container().operator_desk, session_id, _ask(visit))
    return redirect(views.session_path(visit.base, session_id))


def _ask(visit: Visit) -> Ask:
    """The form's request: keyed by the action id the page was rendered with."""
    key = console_key(visit.form.get("action_id", ""))
    return Ask(key, visit.operator.name, visit.form.get("note"), visit.operator.caller.role_label)
