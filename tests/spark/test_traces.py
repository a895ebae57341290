"""The job's trace, read at a real OTLP/HTTP endpoint (localdev/otlp_receiver.py) and on the
messages the job put on the project's Service Bus emulator: one span per job, and every row's
message in its trace, so each import task the function app runs is in it too."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.trace import SpanContext, TraceFlags

from localdev.otlp_receiver import OtlpReceiver, Span, run_otlp_receiver
from shared.telemetry.context import message_span_context, trace_properties

from .catalogues import product, write_csv
from .command import run_job_command
from .queues import QUEUE, assert_arrived_once_in_order, drain

pytestmark = pytest.mark.integration


def caller_context() -> SpanContext:
    return SpanContext(random.getrandbits(128), random.getrandbits(64), True, TraceFlags(1))


def the_job_span(otlp: OtlpReceiver, job_id: str) -> Span:
    (span,) = [s for s in otlp.spans() if s.name == f"product import {job_id}"]
    return span


def message_contexts(received: dict[str, list[dict]]) -> list[SpanContext | None]:
    """The span context each message was sent in, from its application properties as the
    function app reads them; also checks that ``Diagnostic-Id`` repeats ``traceparent``."""
    messages = [m for session in received.values() for m in session]
    for m in messages:
        assert m["properties"].get("Diagnostic-Id") == m["properties"].get("traceparent")
    return [message_span_context(m["properties"]) for m in messages]


def test_the_command_with_an_otlp_endpoint_is_one_trace_that_every_row_carries(
    connection_string: str, tmp_path: Path
) -> None:
    """The job's span continues the caller's TRACEPARENT and is exported before the command
    ends; every message the executors sent carries its context (the executors, which share
    the job's environment, start no span of their own)."""
    caller = caller_context()
    path = write_csv(tmp_path / "c.csv", 30, broken_lines={4: "bad,line"})
    with run_otlp_receiver() as otlp:
        manifest = run_job_command(
            ["--input", str(path), "--format", "csv", "--job-id", "traced-1",
             "--sessions", "3", "--queue", QUEUE],
            {
                "ServiceBusConnection": connection_string,
                "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint,
                "TRACEPARENT": trace_properties(caller)["traceparent"],
            },
        )  # fmt: skip
        job = the_job_span(otlp, "traced-1")
        exported = otlp.spans()

    trace_id = trace.format_trace_id(caller.trace_id)
    assert (job.trace_id, job.parent_span_id) == (trace_id, trace.format_span_id(caller.span_id))
    assert {
        key: job.attributes[key]
        for key in ("import.job_id", "import.rows_read", "import.rows_rejected")
    } == {"import.job_id": "traced-1", "import.rows_read": 30, "import.rows_rejected": 1}
    assert (job.attributes["import.rows_sent"], job.attributes["import.sessions"]) == (29, 3)
    assert manifest["trace_id"] == trace_id
    assert [s.name for s in exported] == ["product import traced-1"]  # no span per row

    received = drain(connection_string)
    assert_arrived_once_in_order(
        received, "traced-1", [product(i)["sku"] for i in range(1, 31) if i != 4]
    )
    contexts = [c for c in message_contexts(received) if c is not None]
    assert len(contexts) == 29
    assert {
        (trace.format_trace_id(c.trace_id), trace.format_span_id(c.span_id)) for c in contexts
    } == {(job.trace_id, job.span_id)}
