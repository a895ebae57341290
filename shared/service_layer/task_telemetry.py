"""Each task invocation a span in its order's trace, and the pipeline's metrics from its result.

The span is a child of the context the message was sent in (its ``traceparent``), so the tasks
of one order are siblings under the request that enqueued them. The Functions host hands each
invocation a trace context of its own (``context.trace_context``): when it is in the message's
trace (the host's span for the message), the task span is its child; when it is another trace,
the task span stays in the message's trace and links to it. The span is current while the
processor runs, so every log record and every SDK call of the invocation carries its ids.

Attributes follow the OpenTelemetry messaging conventions (``messaging.*``), plus the
pipeline's own: ``pipeline``, ``session.id``, ``step``, ``task``, ``outcome`` and, for a dead
letter, ``dead_letter.reason``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from ..telemetry.context import (
    InvocationTrace,
    invocation_span_context,
    message_span_context,
    parent_context,
)
from ..telemetry.metrics import PipelineMetrics
from ..telemetry.setup import telemetry
from .session_messages import IncomingMessage, Outcome, Result

Recorder = Callable[[Result], None]


_DISPOSITIONS = {
    Outcome.COMPLETED: "complete",
    Outcome.ALREADY_DONE: "complete",
    Outcome.ABANDONED: "abandon",
    Outcome.DEAD_LETTERED: "dead_letter",
}


def _ignore(result: Result) -> None:
    return None


@contextmanager
def task_invocation(
    *,
    pipeline: str,
    queue: str,
    incoming: IncomingMessage,
    invocation_trace: InvocationTrace | None = None,
) -> Iterator[Recorder]:
    """Run the body in the task's span; the body hands the processor's ``Result`` to the
    recorder it is given. Without telemetry the recorder ignores it and nothing else runs."""
    current = telemetry()
    if current.tracer is None:
        yield _ignore
        return
    message = message_span_context(incoming.application_properties)
    parent, links = parent_context(message, invocation_span_context(invocation_trace))
    task = incoming.application_properties.get("task")
    attributes: dict[str, Any] = {
        "messaging.system": "servicebus",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": queue,
        "pipeline": pipeline,
        "session.id": incoming.session_id,
    }
    if incoming.message_id is not None:
        attributes["messaging.message.id"] = incoming.message_id
    if incoming.delivery_count is not None:
        attributes["messaging.servicebus.message.delivery_count"] = incoming.delivery_count
    name = task if isinstance(task, str) and task else pipeline
    # The duration's attributes; an invocation that raised is counted with outcome "error".
    outcome = {"pipeline": pipeline, "task": name, "outcome": "error"}
    started = time.perf_counter()
    with current.tracer.start_as_current_span(
        name,
        context=parent,
        kind=SpanKind.CONSUMER,
        links=links,
        attributes=attributes,
    ) as span:

        def record(result: Result) -> None:
            _describe(span, result)
            outcome.update(task=result.task or name, outcome=result.outcome.value)
            if current.metrics is not None:
                _count(current.metrics, pipeline, result)

        try:
            yield record
        finally:
            if current.metrics is not None:
                current.metrics.task_duration.record(time.perf_counter() - started, outcome)


def _describe(span: Span, result: Result) -> None:
    if result.task:
        span.update_name(result.task)
        span.set_attribute("task", result.task)
    if result.step is not None:
        span.set_attribute("step", result.step)
    if result.attempt is not None:
        span.set_attribute("attempt", result.attempt)
    span.set_attribute("outcome", result.outcome.value)
    span.set_attribute("messaging.servicebus.disposition_status", _DISPOSITIONS[result.outcome])
    if result.reason:
        span.set_attribute("error.type", result.reason)
    if result.outcome is Outcome.DEAD_LETTERED:
        span.set_attribute("dead_letter.reason", result.reason or "")
        span.set_status(Status(StatusCode.ERROR, result.description or result.reason))


def _count(metrics: PipelineMetrics, pipeline: str, result: Result) -> None:
    attributes = {"pipeline": pipeline}
    if result.opens_session:
        metrics.sessions_in_flight.add(1, attributes)
    if result.fails_session:
        failed = {**attributes, "task": result.task or "", "reason": result.reason or ""}
        metrics.sessions_failed.add(1, failed)
    if result.ends_session:
        metrics.sessions_in_flight.add(-1, attributes)
        if result.outcome in (Outcome.COMPLETED, Outcome.ALREADY_DONE):
            metrics.sessions_completed.add(1, attributes)
