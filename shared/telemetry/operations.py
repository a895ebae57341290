"""Spans for what is not a task: an HTTP request to the app, an archive run, a replay. Each
yields a function that adds attributes to its span (one that does nothing without telemetry).

An HTTP request's span continues the caller's trace: its parent is the host's span for the
invocation when that is in the caller's trace, else the caller's ``traceparent`` header; with
neither it starts a trace. A replay links to the trace of each failed session it replays.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode

from .context import (
    InvocationTrace,
    invocation_span_context,
    message_span_context,
    parent_context,
    span_context_of,
)
from .setup import telemetry

Note = Callable[..., None]


def _ignore(**attributes: Any) -> None:
    return None


@contextmanager
def request_span(
    method: str,
    route: str,
    headers: Mapping[str, str],
    invocation_trace: InvocationTrace | None = None,
) -> Iterator[Note]:
    """A SERVER span ``"<METHOD> <route>"`` around an HTTP function's work, ``route`` being the
    path's template (``/api/orders/{job_id}``, ``/console/sessions/{session_id}``). Note the
    response's status with ``note(**{"http.response.status_code": status})``."""
    current = telemetry()
    if current.tracer is None:
        yield _ignore
        return
    caller = span_context_of(headers.get("traceparent"), headers.get("tracestate"))
    parent, links = parent_context(caller, invocation_span_context(invocation_trace))
    with current.tracer.start_as_current_span(
        f"{method} {route}",
        context=parent,
        kind=SpanKind.SERVER,
        links=links,
        attributes={"http.request.method": method, "http.route": route},
    ) as span:

        def note(**attributes: Any) -> None:
            span.set_attributes(attributes)
            status = attributes.get("http.response.status_code")
            if isinstance(status, int) and status >= 500:
                span.set_status(Status(StatusCode.ERROR))

        yield note


@contextmanager
def operation_span(
    name: str,
    *,
    attributes: Mapping[str, Any] | None = None,
    replaying: Iterable[Mapping[Any, Any]] = (),
) -> Iterator[Note]:
    """An INTERNAL span ``name`` in the current trace (a new one when there is none), linked
    to the trace of every message in ``replaying`` (their application properties)."""
    current = telemetry()
    if current.tracer is None:
        yield _ignore
        return
    originals: dict[int, SpanContext] = {}
    for properties in replaying:
        found = message_span_context(properties)
        if found is not None:
            originals.setdefault(found.trace_id, found)  # one link per failed session's trace
    with current.tracer.start_as_current_span(
        name,
        links=[Link(context, {"link.reason": "replay-of"}) for context in originals.values()],
        attributes=dict(attributes or {}),
    ) as span:
        yield lambda **more: span.set_attributes(more)


def count_archived(amount: int, *, queue: str) -> None:
    """``amount`` dead letters of ``queue`` moved into the archive."""
    metrics = telemetry().metrics
    if metrics is not None and amount:
        metrics.dead_letters_archived.add(amount, {"messaging.destination.name": queue})


def count_replayed(amount: int, *, queue: str) -> None:
    """``amount`` archived messages sent again to ``queue`` as a replay."""
    metrics = telemetry().metrics
    if metrics is not None and amount:
        metrics.replays_sent.add(amount, {"messaging.destination.name": queue})
