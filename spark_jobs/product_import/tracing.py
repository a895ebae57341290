"""The job's trace: one span per job on the driver, and every row's message in it.

The driver runs the job inside the span ``product import <job_id>`` (a child of the caller's
``TRACEPARENT`` when one is given, else a new trace). Its context travels to the executors with
the plan, as the W3C application properties a message carries (``traceparent``,
``Diagnostic-Id``, ``tracestate``: plain strings). An executor whose process exports telemetry
too sends each partition inside a PRODUCER span ``send <queue>`` under the job's, and its
messages carry that span's context; one that exports nothing stamps the job's context as it
came. Either way the import task each row starts in the function app is in the job's trace.

Both sides use the app's telemetry (``shared.telemetry``): set up from the process's
environment (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``APPLICATIONINSIGHTS_CONNECTION_STRING``), and
with neither no span is started and no message carries a trace. The per-row cost is the same
two or three properties copied onto each message; spans are per job and per partition.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind

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


@contextmanager
def send_span(job: Mapping[str, str], queue_name: str) -> Iterator[JobTrace]:
    """On an executor: the context its messages carry, for the job's context ``job`` (message
    properties). When this process exports, a PRODUCER span ``send <queue>`` under the job's
    around the body, exported when it ends (a Spark worker can be stopped without a goodbye);
    else ``job`` itself."""
    current = telemetry()
    parent = message_span_context(job)
    if current.tracer is None or parent is None:
        yield JobTrace(dict(job))
        return
    try:
        with current.tracer.start_as_current_span(
            f"send {queue_name}",
            context=trace.set_span_in_context(trace.NonRecordingSpan(parent)),
            kind=SpanKind.PRODUCER,
            attributes={
                "messaging.system": "servicebus",
                "messaging.operation.type": "send",
                "messaging.operation.name": "send",
                "messaging.destination.name": queue_name,
            },
        ) as span:
            yield JobTrace(
                trace_properties(span.get_span_context()), lambda **more: span.set_attributes(more)
            )
    finally:
        current.flush()
