"""What every HTTP function shares: JSON and RFC 9457 problem responses, and the one mapping
of the app's errors to statuses.

A binding decorated with ``@endpoint`` raises the app's errors and this module answers:
``InvalidInput`` 400 (``TooLarge`` 413) with ``errors: [{field, problem}]``, ``NotFound`` 404,
``Conflict`` 409, ``Unprocessable`` 422, ``ServiceUnavailable`` 503; a retryable error
carries ``Retry-After``. Anything else is a bug: logged with its traceback, answered with a
500 problem document that holds none.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

import azure.functions as func

from ..domain.errors import (
    Conflict,
    InvalidInput,
    NotFound,
    PipelineError,
    ServiceUnavailable,
    TooLarge,
    Unprocessable,
)
from ..telemetry.operations import request_span

logger = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"
RETRY_AFTER_SECONDS = 30  # a backing service out of reach
RETRY_CONFLICT_AFTER_SECONDS = 5  # a request in flight, a session lock held elsewhere

_STATUSES: tuple[tuple[type[PipelineError], int], ...] = (
    (TooLarge, 413),
    (InvalidInput, 400),
    (NotFound, 404),
    (Conflict, 409),
    (Unprocessable, 422),
    (ServiceUnavailable, 503),
)

HttpFunction = Callable[[func.HttpRequest], func.HttpResponse]


def json_response(
    status: int, document: Any, *, headers: Mapping[str, str] | None = None
) -> func.HttpResponse:
    return func.HttpResponse(
        json.dumps(document, default=str),
        status_code=status,
        mimetype="application/json",
        headers=dict(headers or {}),
    )


def problem(
    status: int,
    title: str,
    detail: str,
    *,
    type_: str = "about:blank",
    headers: Mapping[str, str] | None = None,
    **extensions: Any,
) -> func.HttpResponse:
    """A problem document whose ``detail`` tells the caller what to fix; ``extensions`` add
    members such as ``errors=[{"field": ..., "problem": ...}]``."""
    document = {"type": type_, "title": title, "status": status, "detail": detail, **extensions}
    return func.HttpResponse(
        json.dumps(document, default=str),
        status_code=status,
        mimetype=PROBLEM_JSON,
        # Also as a header, so the type is on the response object itself, not only in the
        # mimetype the worker turns into a header.
        headers={"Content-Type": PROBLEM_JSON, **(headers or {})},
    )


def error_response(error: PipelineError) -> func.HttpResponse:
    """The problem document of one of the app's errors."""
    status = next((code for kind, code in _STATUSES if isinstance(error, kind)), 500)
    members: dict[str, Any] = dict(error.members)
    detail = str(error)
    if isinstance(error, InvalidInput):
        detail = f"{error.field} {error.problem}"
        members["errors"] = [{"field": error.field, "problem": error.problem}]
    headers: dict[str, str] = {}
    if isinstance(error, ServiceUnavailable):
        detail = (
            f"{error} Retry in {RETRY_AFTER_SECONDS} seconds, with the same Idempotency-Key "
            "where the request has one: nothing was done that the retry would do twice."
        )
        headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    elif error.retryable:
        headers["Retry-After"] = str(RETRY_CONFLICT_AFTER_SECONDS)
    return problem(status, error.title, detail, headers=headers, **members)


def endpoint(function: HttpFunction) -> HttpFunction:
    """Map the app's errors raised by ``function`` to problem documents (see the module). The
    request is a span that continues the caller's trace (its ``traceparent`` header)."""

    @functools.wraps(function)
    def wrapper(req: func.HttpRequest) -> func.HttpResponse:
        with request_span(req.method, route_template(req), req.headers) as note:
            response = _answer(function, req)
            note(**{"http.response.status_code": response.status_code})
        return response

    return wrapper


def _answer(function: HttpFunction, req: func.HttpRequest) -> func.HttpResponse:
    try:
        return function(req)
    except PipelineError as error:
        if isinstance(error, ServiceUnavailable):
            logger.warning("%s: %s", function.__name__, error)
        return error_response(error)
    except Exception:
        logger.exception("%s failed", function.__name__)
        return problem(
            500,
            "Internal error",
            "The request failed on an error in the app, which is logged. A request with "
            "an Idempotency-Key may be sent again with the same key.",
        )


def route_template(req: func.HttpRequest) -> str:
    """The route a request matched, its values put back as ``{name}``: ``orders/{job_id}``."""
    path = req.url.split("/api/", 1)[-1].split("?", 1)[0]
    names = {value: name for name, value in req.route_params.items() if value}
    return "/".join(f"{{{names[part]}}}" if part in names else part for part in path.split("/"))


def url_for(req: func.HttpRequest, path: str) -> str:
    """The absolute URL of ``/api/<path>`` on the host that received ``req``."""
    base = req.url.split("/api/", 1)[0]
    return f"{base}/api/{path}"
