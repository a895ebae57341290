"""The HTTP API as an OpenAPI 3.1 document: every route under ``/api`` with what it takes and
answers (README.md, "HTTP API", says it at length), and for each declared pipeline that has a
route of no module of its own, its generic start and status routes. Served by
``openapi_http`` at ``GET /api/openapi.json``; tests/bindings/test_openapi.py validates it and
compares it with the routes the app registers."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ..domain.pipelines import Pipeline
from .openapi_schemas import IDEMPOTENCY_KEY, PROBLEM, SCHEMAS

OPENAPI_ROUTE = "openapi.json"

# (method, route under /api, operation id: the function's name, summary, body, answers)
# body: "json" (an object), "none"; answers: status -> description.
Operation = tuple[str, str, str, str, str, dict[str, str]]

_OK = {"200": "the document"}
_UNKNOWN = {"200": "the document", "404": "unknown"}
_ACTION = {"200": "its state", "400": "no note", "404": "unknown pipeline"}
_REPLAYED = {
    "202": "the replay: {new_session_id, sent, status_url, failed_session_url}, with a Location",
    "400": "no Idempotency-Key, or a field to fix",
    "404": "unknown session",
    "409": "incomplete, claimed by another replay, or the same key still in flight",
    "422": "the key was used for another request",
}

OPERATIONS: tuple[Operation, ...] = (
    (
        "post",
        "orders",
        "submit_order_http",
        "Start an order (the purchase pipeline)",
        "json",
        {
            "202": "the started job, with a Location",
            "400": "invalid order",
            "409": "the same key still in flight",
            "422": "the key was used for another order",
        },
    ),
    ("get", "orders/{job_id}", "get_order", "Where an order stands", "none", _UNKNOWN),
    (
        "get",
        "order-numbers/{order_number}",
        "get_order_by_number",
        "The order an order number was given to",
        "none",
        _UNKNOWN,
    ),
    ("get", "imports/{job_id}", "get_import", "An import's row counts", "none", _UNKNOWN),
    (
        "get",
        "failed-sessions",
        "list_failed_sessions",
        "Failed sessions, filtered, paged",
        "none",
        _OK,
    ),
    (
        "get",
        "failed-session-groups",
        "failed_session_groups",
        "Failed sessions counted by queue, task and reason",
        "none",
        _OK,
    ),
    (
        "get",
        "failed-sessions/{session_id}",
        "get_failed_session",
        "One failed session and its archived messages",
        "none",
        _UNKNOWN,
    ),
    (
        "post",
        "failed-sessions/{session_id}/replay",
        "replay_failed_session",
        "Replay a failed session",
        "none",
        _REPLAYED,
    ),
    (
        "post",
        "failed-sessions/{session_id}/edit-and-replay",
        "edit_and_replay_session",
        "Replay a failed session with edited messages",
        "json",
        _REPLAYED,
    ),
    (
        "post",
        "failed-sessions/{session_id}/resolve",
        "resolve_failed_session",
        "Resolve a failed session without a replay",
        "json",
        {"200": "resolved", "400": "no note", "409": "replayed or resolved by another request"},
    ),
    (
        "get",
        "failed-sessions/{session_id}/history",
        "failed_session_history",
        "What operators did to a session, and its replays",
        "none",
        _UNKNOWN,
    ),
    (
        "get",
        "failed-session-fingerprints",
        "failed_session_fingerprints",
        "Root causes of failed sessions",
        "none",
        _OK,
    ),
    (
        "get",
        "failed-session-fingerprints/{fingerprint}",
        "failed_session_fingerprint",
        "The sessions of one root cause",
        "none",
        _OK,
    ),
    (
        "post",
        "bulk-previews",
        "preview_bulk",
        "Preview a bulk replay or resolution",
        "json",
        {"201": "the preview and its token", "400": "nothing matches, or a field to fix"},
    ),
    (
        "post",
        "bulk-actions",
        "confirm_bulk",
        "Start the bulk action a preview confirms",
        "json",
        {
            "202": "the request, with a Location",
            "400": "no note",
            "409": "the token is used, expired, or the sessions changed",
        },
    ),
    (
        "post",
        "replays",
        "request_replay",
        "Replay every failed session of a group or window",
        "json",
        {"202": "the request, with a Location", "400": "a field to fix"},
    ),
    ("get", "replays/{request_id}", "get_replay", "A bulk replay's progress", "none", _UNKNOWN),
    (
        "get",
        "exports/failed-sessions",
        "export_failed_sessions_csv",
        "Failed sessions as CSV",
        "none",
        {"200": "text/csv", "400": "too many sessions"},
    ),
    ("get", "audit", "get_audit", "What operators did, in a window", "none", _OK),
    ("get", "exports/audit", "export_audit_csv", "The audit trail as CSV", "none", _OK),
    ("get", "overview", "get_overview", "What the console's overview shows", "none", _OK),
    ("get", "pipelines", "list_pipelines", "Each declared pipeline and its pause", "none", _OK),
    (
        "get",
        "pipelines/{pipeline}",
        "get_pipeline",
        "A pipeline's pause and its history",
        "none",
        _UNKNOWN,
    ),
    ("post", "pipelines/{pipeline}/pause", "pause_pipeline", "Pause a pipeline", "json", _ACTION),
    (
        "post",
        "pipelines/{pipeline}/resume",
        "resume_pipeline",
        "Resume a pipeline",
        "json",
        _ACTION,
    ),
    ("get", OPENAPI_ROUTE, "get_openapi", "This document", "none", _OK),
)


def openapi_document(pipelines: Iterable[Pipeline], *, server: str = "/") -> dict[str, Any]:
    """The API's OpenAPI 3.1 document, with the generic routes of ``pipelines``."""
    paths: dict[str, dict[str, Any]] = {}
    for method, route, operation_id, summary, body, answers in OPERATIONS:
        operation = _operation(route, operation_id, summary, answers)
        if body == "json":
            operation["requestBody"] = _json_body("a JSON object (README.md, 'HTTP API')")
        if operation_id in _KEYED:
            operation["parameters"].append({**IDEMPOTENCY_KEY, "required": _KEYED[operation_id]})
        paths.setdefault(f"/api/{route}", {})[method] = operation
    for pipeline in pipelines:
        if pipeline.route is None or pipeline.own_routes:
            continue
        paths.update(job_paths(pipeline))
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Ordered Service Bus pipelines",
            "version": "1",
            "description": "Every route takes a function key (x-functions-key or ?code=); "
            "operator routes need the key's role too (docs/console.md, 'Roles').",
        },
        "servers": [{"url": server}],
        "security": [{"functionKey": []}],
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {
                "functionKey": {"type": "apiKey", "in": "header", "name": "x-functions-key"}
            },
        },
    }


# Operations that take an Idempotency-Key: whether they require it.
_KEYED = {
    "submit_order_http": False,
    "replay_failed_session": True,
    "edit_and_replay_session": True,
    "resolve_failed_session": True,
}


def job_paths(pipeline: Pipeline) -> dict[str, dict[str, Any]]:
    """``POST /api/<route>`` and ``GET /api/<route>/{job_id}`` of a declared pipeline."""
    start = _operation(
        pipeline.route or "",
        f"start_{pipeline.name}",
        f"Start a job of the {pipeline.name} pipeline",
        {
            "202": "the job's tasks are enqueued as one session; Location: its status",
            "400": "a field of the payload the pipeline refuses, named",
            "409": "the same key still in flight",
            "413": "the body is over 256 KiB",
            "422": "the key was used with another payload",
        },
    )
    start["description"] = (
        f"The body is the job's payload, checked by the pipeline's check_payload before "
        f"anything is sent; its tasks: {', '.join(pipeline.tasks)}."
    )
    start["requestBody"] = _json_body(f"the payload of a {pipeline.name} job")
    start["parameters"].append({**IDEMPOTENCY_KEY, "required": False})
    start["responses"]["202"]["content"] = _json_ref("StartedJob")
    status = _operation(
        f"{pipeline.route}/{{job_id}}",
        f"get_{pipeline.name}_job",
        f"Where a job of the {pipeline.name} pipeline stands",
        {"200": "its status, each task's state, the failed task, the outputs", "404": "unknown"},
    )
    status["responses"]["200"]["content"] = _json_ref("JobStatus")
    return {
        f"/api/{pipeline.route}": {"post": start},
        f"/api/{pipeline.route}/{{job_id}}": {"get": status},
    }


def _operation(route: str, operation_id: str, summary: str, answers: dict[str, str]) -> dict:
    responses: dict[str, Any] = {}
    for status, description in answers.items():
        responses[status] = {"description": description} if status < "400" else dict(PROBLEM)
        if status >= "400":
            responses[status]["description"] = f"{description}: {PROBLEM['description']}"
    return {
        "operationId": operation_id,
        "summary": summary,
        "parameters": [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in re.findall(r"\{(\w+)\}", route)
        ],
        "responses": responses,
    }


def _json_body(description: str) -> dict[str, Any]:
    return {
        "required": True,
        "description": description,
        "content": {"application/json": {"schema": {"type": "object"}}},
    }


def _json_ref(name: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}}
