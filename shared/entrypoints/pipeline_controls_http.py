"""HTTP API of the pipelines' pauses: each declared pipeline, whether it is paused and why
(its circuit, or an operator), and an operator's pause and resume, each with a note, audited
with its caller."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import azure.functions as func

from ..bootstrap import container
from ..domain.errors import InvalidInput
from ..domain.roles import Role
from ..service_layer.pauses import PipelineState
from .http import FUNCTION_KEY, api_route, endpoint, json_response
from .http_input import json_body, route_value
from .operator_views import pause_view
from .roles import api_caller, requires

bp = func.Blueprint()

MAX_NOTE_BODY_BYTES = 4096
NOTE_EXAMPLE = '{"note": "Storage failover in progress"}'


@bp.route(route=api_route("pipelines"), methods=["GET"], auth_level=FUNCTION_KEY)
@endpoint
@requires(Role.READER)
def list_pipelines(req: func.HttpRequest) -> func.HttpResponse:
    """Each declared pipeline with its queue and its pause (null while it runs), as the
    instance that answers sees it."""
    states = container().pipeline_controls.states()
    return json_response(200, {"pipelines": [_state(s) for s in states]})


@bp.route(route=api_route("pipelines/{pipeline}"), methods=["GET"], auth_level=FUNCTION_KEY)
@endpoint
@requires(Role.READER)
def get_pipeline(req: func.HttpRequest) -> func.HttpResponse:
    """One pipeline's pause and the history of its operators' pauses and resumes."""
    name = route_value(req, "pipeline")
    controls = container().pipeline_controls
    state = controls.state(name)
    history = [asdict(entry) for entry in controls.history(name)]
    return json_response(200, {**_state(state), "history": history})


@bp.route(route=api_route("pipelines/{pipeline}/pause"), methods=["POST"], auth_level=FUNCTION_KEY)
@endpoint
@requires(Role.OPERATOR)
def pause_pipeline(req: func.HttpRequest) -> func.HttpResponse:
    """Pause a pipeline, with a required note: no task of it runs until it is resumed; its
    messages wait. 200 with its state (an earlier pause is kept as it was)."""
    name = route_value(req, "pipeline")
    document = json_body(req, max_bytes=MAX_NOTE_BODY_BYTES, example=NOTE_EXAMPLE)
    who = api_caller(req)
    state = container().pipeline_controls.pause(
        name, who=who.name, note=_note(document), role=who.role_label
    )
    return json_response(200, _state(state))


@bp.route(route=api_route("pipelines/{pipeline}/resume"), methods=["POST"], auth_level=FUNCTION_KEY)
@endpoint
@requires(Role.OPERATOR)
def resume_pipeline(req: func.HttpRequest) -> func.HttpResponse:
    """End an operator's pause of a pipeline, with a required note: 200 with its state (still
    paused by its circuit while a dependency is out of reach)."""
    name = route_value(req, "pipeline")
    document = json_body(req, max_bytes=MAX_NOTE_BODY_BYTES, example=NOTE_EXAMPLE)
    who = api_caller(req)
    state = container().pipeline_controls.resume(
        name, who=who.name, note=_note(document), role=who.role_label
    )
    return json_response(200, _state(state))


def _note(document: dict[str, Any]) -> str | None:
    unknown = sorted(set(document) - {"note"})
    if unknown:
        raise InvalidInput(unknown[0], 'is not a field; send {"note": ...}')
    note = document.get("note")
    if note is not None and not isinstance(note, str):
        raise InvalidInput("note", "must be a string")
    return note


def _state(state: PipelineState) -> dict[str, Any]:
    return {"pipeline": state.pipeline, "queue": state.queue, "paused": pause_view(state.paused)}
