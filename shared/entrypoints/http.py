"""What every HTTP function shares: JSON and RFC 9457 problem responses, and the one mapping
of the app's errors to statuses.

A binding decorated with ``@endpoint`` raises the app's errors and this module answers:
``InvalidInput`` 400 (``TooLarge`` 413, ``UnsupportedMediaType`` 415) with ``errors: [{field,
problem}]``, ``Forbidden`` 403, ``NotFound`` 404, ``Conflict`` 409, ``Unprocessable`` 422,
``ServiceUnavailable`` 503; a retryable error carries ``Retry-After``. Anything else is a
bug: logged with its traceback, answered with a 500 problem document that holds none.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

import azure.functions as func

from ..bootstrap import container
from ..domain.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    PipelineError,
    SendUnconfirmed,
    ServiceUnavailable,
    TooLarge,
    Unprocessable,
    UnsupportedMediaType,
)
from ..telemetry.operations import request_span

logger = logging.getLogger(__name__)

# host.json sets no route prefix (extensions.http.routePrefix ""): the API's routes carry this
# one themselves, so the console can live at /console beside it.
API_PREFIX = "api"
FUNCTION_KEY = func.AuthLevel.FUNCTION  # every API route takes a function key
PROBLEM_JSON = "application/problem+json"
RETRY_AFTER_SECONDS = 30  # a backing service out of reach
RETRY_CONFLICT_AFTER_SECONDS = 5  # a request in flight, a session lock held elsewhere

_STATUSES: tuple[tuple[type[PipelineError], int], ...] = (
    (TooLarge, 413),
    (UnsupportedMediaType, 415),
    (InvalidInput, 400),
    (Forbidden, 403),
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
        _json_text(document),
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
        _json_text(document),
        status_code=status,
        mimetype=PROBLEM_JSON,
        # Also as a header, so the type is on the response object itself, not only in the
        # mimetype the worker turns into a header.
        headers={"Content-Type": PROBLEM_JSON, **(headers or {})},
    )


def _json_text(document: Any) -> str:
    """The JSON text of an answer, ending with a newline as a text file's last line does
    (``curl`` then leaves the prompt on a line of its own)."""
    return json.dumps(document, default=str) + "\n"


def status_of(error: PipelineError) -> int:
    """The HTTP status of one of the app's errors (500 for a kind this module does not map)."""
    return next((code for kind, code in _STATUSES if isinstance(error, kind)), 500)


def detail_of(error: PipelineError) -> str:
    """What a caller is told to do about the error."""
    if isinstance(error, InvalidInput):
        return f"{error.field} {error.problem}"
    if isinstance(error, SendUnconfirmed):
        return (
            f"{error} Service Bus did not confirm the send: the messages may have gone out"
            + (f" (job {error.job_id}, whose status says whether it runs)" if error.job_id else "")
            + ". Retry with the same Idempotency-Key, which repeats nothing; a retry without "
            "one may start the work twice."
        )
    if isinstance(error, ServiceUnavailable):
        return (
            f"{error} Retry in {RETRY_AFTER_SECONDS} seconds, with the same Idempotency-Key "
            "where the request has one: nothing was done that the retry would do twice."
        )
    return str(error)


def retry_after(error: PipelineError) -> dict[str, str]:
    """The ``Retry-After`` header of a retryable error, else none."""
    if isinstance(error, ServiceUnavailable):
        return {"Retry-After": str(RETRY_AFTER_SECONDS)}
    if error.retryable:
        return {"Retry-After": str(RETRY_CONFLICT_AFTER_SECONDS)}
    return {}


def error_response(error: PipelineError) -> func.HttpResponse:
    """The problem document of one of the app's errors."""
    members: dict[str, Any] = dict(error.members)
    if isinstance(error, InvalidInput):
        members["errors"] = [{"field": error.field, "problem": error.problem}]
    return problem(
        status_of(error), error.title, detail_of(error), headers=retry_after(error), **members
    )


def endpoint(function: HttpFunction) -> HttpFunction:
    """Map the app's errors raised by ``function`` to problem documents (see the module). The
    request is a span (``traced``)."""

    @traced
    @functools.wraps(function)
    def wrapper(req: func.HttpRequest) -> func.HttpResponse:
        return _answer(function, req)

    return wrapper


def traced(function: HttpFunction) -> HttpFunction:
    """Make each request to ``function`` a span, ``"<METHOD> <route template>"``, that
    continues the caller's trace (its ``traceparent`` header)."""

    @functools.wraps(function)
    def wrapper(req: func.HttpRequest) -> func.HttpResponse:
        with request_span(req.method, route_template(req), req.headers) as note:
            response = function(req)
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
    """The path a request matched, its route values put back as ``{name}``:
    ``/api/orders/{job_id}``, ``/console/sessions/{session_id}``."""
    path = urlsplit(req.url).path
    names = {value: name for name, value in req.route_params.items() if value}
    return "/".join(
        f"{{{names[unquote(part)]}}}" if unquote(part) in names else part
        for part in path.split("/")
    )


def api_route(route: str) -> str:
    """The route of an API function: ``api/<route>``."""
    return f"{API_PREFIX}/{route}"


def url_for(req: func.HttpRequest, path: str) -> str:
    """The URL of ``/api/<path>``: absolute on the configured public base (``PUBLIC_BASE_URL``)
    when there is one, else the path alone, which a client resolves against the URL it
    called (RFC 9110, 10.2.2). Never built from the request (``req`` is not read): its Host
    header is whatever the client sent."""
    return f"{container().settings.public_base_url or ''}/{api_route(path)}"
