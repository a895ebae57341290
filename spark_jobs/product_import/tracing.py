"""The job's trace: one span per job on the driver, and every row's message in it.

The driver runs the job inside the span ``product import <job_id>`` (a child of the caller's
``TRACEPARENT`` when one is given, else a new trace), with the app's telemetry
(``shared.telemetry``, set up from ``OTEL_EXPORTER_OTLP_ENDPOINT`` /
``APPLICATIONINSIGHTS_CONNECTION_STRING``; with neither no span is started and no message
carries a trace). Its context travels to the executors with the plan, as the W3C application
properties a message carries (``traceparent``, ``Diagnostic-Id``, ``tracestate``: plain
strings), and every row's message carries them, so the import task each row starts in the
function app is a child of the job's span.

The executors start no span and set up no exporter: the per-row cost is those properties on
each message, and no send task waits on a collector (an exporter's flush blocks for as long as
its endpoint does not answer, and a Spark worker must flush before its task ends, since it can
be stopped without running exit handlers).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace

from shared.telemetry.context import message_span_context, span_context_of, trace_properties
from shared.telemetry.setup import telemetry

# The caller's trace context, as an orchestrator passes it to a process it starts.
TRACEPARENT = "TRACEPARENT"


def _ignore(**attributes: Any) -> None:
    return None


@dataclass(frozen=True)
class JobTrace:
    """The job span's context as message properties (empty without telemetry), and a
    function that adds attributes to the span."""

    properties: dict[str, str] = field(default_factory=dict)
    note: Callable[..., None] = _ignore

    @property
    def trace_id(self) -> str | None:
        found = message_span_context(self.properties)
        return trace.format_trace_id(found.trace_id) if found is not None else None


@contextmanager
def job_span(job_id: str, *, traceparent: str | None = None) -> Iterator[JobTrace]:
    """The span ``product import <job_id>`` around the body, a child of ``traceparent`` when
    it is a valid W3C traceparent; nothing without telemetry."""
    current = telemetry()
    if current.tracer is None:
        yield JobTrace()
        return
    caller = span_context_of(traceparent)
    parent = trace.set_span_in_context(trace.NonRecordingSpan(caller)) if caller else None
    with current.tracer.start_as_current_span(
        f"product import {job_id}", context=parent, attributes={"import.job_id": job_id}
    ) as span:
        yield JobTrace(
            trace_properties(span.get_span_context()), lambda **more: span.set_attributes(more)
        )
