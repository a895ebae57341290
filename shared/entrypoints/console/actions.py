"""The console's actions on failed sessions: each a POST carrying the page's CSRF token (checked
by ``console_view``) and an action id, carried out by one service and answered with a redirect
to the page that shows its outcome (or an error page saying why not)."""

from __future__ import annotations

from urllib.parse import quote

import azure.functions as func

from ...bootstrap import container
from ...domain.archive import AlreadyReplayed, ReplayIncomplete
from ...domain.errors import InvalidInput
from ...service_layer.operator_actions import replay_for_operator
from ..routes import route_value
from .frame import ANONYMOUS, Visit, console_view, error_page, redirect

bp = func.Blueprint()


@bp.route(route="console/sessions/{session_id}/replay", methods=["POST"], auth_level=ANONYMOUS)
@console_view
def console_replay(visit: Visit) -> func.HttpResponse:
    session_id = route_value(visit.req, "session_id")
    c = container()
    try:
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
    except (AlreadyReplayed, ReplayIncomplete) as error:
        return error_page(visit, 409, "The session cannot be replayed now", str(error))
    except InvalidInput as error:
        return error_page(visit, 400, f"Check {error.field}", str(error))
    page = f"{visit.base}/sessions/{quote(session_id, safe='')}"
    return redirect(f"{page}?replayed={quote(result.new_session_id, safe='')}")
