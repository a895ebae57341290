"""W3C trace context on Service Bus messages, as the azure-servicebus SDK carries it.

The SDK (``azure/servicebus/_common/tracing.py``) stamps a message it sends with the context of
a span as application properties: ``traceparent`` and ``Diagnostic-Id`` (the same W3C
traceparent, under the name the .NET clients and the Functions host read), and ``tracestate``
when the context has one. A receiver reads ``traceparent``, else ``Diagnostic-Id``, and
``tracestate``. Received properties can have ``bytes`` keys and values (the AMQP decoder's), so
both are read here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from .setup import telemetry

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
DIAGNOSTIC_ID = "Diagnostic-Id"

_W3C = TraceContextTextMapPropagator()


def trace_properties(span_context: SpanContext) -> dict[str, str]:
    """The application properties that carry ``span_context`` (none for an invalid one)."""
    if not span_context.is_valid:
        return {}
    carrier: dict[str, str] = {}
    _W3C.inject(carrier, trace.set_span_in_context(NonRecordingSpan(span_context)))
    properties = {TRACEPARENT: carrier[TRACEPARENT], DIAGNOSTIC_ID: carrier[TRACEPARENT]}
    if carrier.get(TRACESTATE):
        properties[TRACESTATE] = carrier[TRACESTATE]
    return properties


def sending_trace_properties() -> dict[str, str]:
    """The properties that make a message sent now a child of the current span; none when
    nothing is traced."""
    if telemetry().tracer is None:
        return {}
    return trace_properties(trace.get_current_span().get_span_context())


def span_context_of(traceparent: str | None, tracestate: str | None = None) -> SpanContext | None:
    """The remote span context of a W3C ``traceparent``; None when it is absent or invalid."""
    if not traceparent:
        return None
    carrier = {TRACEPARENT: traceparent, TRACESTATE: tracestate or ""}
    found = trace.get_current_span(_W3C.extract(carrier)).get_span_context()
    return found if found.is_valid else None


def message_span_context(properties: Mapping[Any, Any] | None) -> SpanContext | None:
    """The span context a message was sent in, read from its application properties."""
    if not properties:
        return None
    traceparent = _text(properties, TRACEPARENT) or _text(properties, DIAGNOSTIC_ID)
    return span_context_of(traceparent, _text(properties, TRACESTATE))


def trace_id_of(properties: Mapping[Any, Any] | None) -> str | None:
    """The trace id (32 hex digits) a message belongs to, or None."""
    found = message_span_context(properties)
    return trace.format_trace_id(found.trace_id) if found is not None else None


def _text(properties: Mapping[Any, Any], name: str) -> str | None:
    value = properties.get(name)
    if value is None:
        value = properties.get(name.encode("ascii"))
    if isinstance(value, bytes):
        try:
            return value.decode("ascii")
        except UnicodeDecodeError:
            return None
    return value if isinstance(value, str) else None


class InvocationTrace(Protocol):
    """The trace context the Functions host hands an invocation (``context.trace_context``)."""

    @property
    def trace_parent(self) -> str: ...
    @property
    def trace_state(self) -> str: ...


def invocation_span_context(invocation: InvocationTrace | None) -> SpanContext | None:
    if invocation is None:
        return None
    return span_context_of(invocation.trace_parent, invocation.trace_state)


def parent_context(
    message: SpanContext | None, invocation: SpanContext | None
) -> tuple[Context | None, list[Link]]:
    """The parent of a span for work that ``message`` (the sender's context) asked for and
    the host ran in ``invocation``: the host's span when it is in the sender's trace, else the
    sender's context with a link to the host's span; None (a new trace) with neither."""
    if message is None and invocation is None:
        return None, []
    if message is None or (invocation is not None and invocation.trace_id == message.trace_id):
        chosen = invocation
        links: list[Link] = []
    else:
        chosen = message
        links = [Link(invocation)] if invocation is not None else []
    assert chosen is not None
    return trace.set_span_in_context(trace.NonRecordingSpan(chosen)), links
