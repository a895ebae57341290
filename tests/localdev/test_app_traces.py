"""The real app on the local host exporting to a real OTLP/HTTP endpoint
(localdev/otlp_receiver.py): the five tasks of an order are five spans in the order's trace,
with the messaging attributes and the pipeline's own; every log record of an invocation carries
its span; the metrics count the order; a failed order's spans say where and why it failed, and
its dead letters keep its trace.

The order's messages are sent in the context of a caller's span, the way the HTTP API sends
them (the message properties the azure-servicebus SDK reads: traceparent and Diagnostic-Id)."""

from __future__ import annotations

import itertools
import logging
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from opentelemetry import trace
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status as ProtoStatus
from opentelemetry.trace import SpanContext, TraceFlags

from localdev.otlp_receiver import OtlpReceiver, Span, run_otlp_receiver
from shared.domain.pipelines import PURCHASE_TASKS, purchase_messages
from shared.telemetry.context import trace_id_of, trace_properties
from shared.telemetry.plan import Telemetry
from shared.telemetry.setup import configure_telemetry, use_telemetry
from tests.polling import wait_for

from .conftest import APP_IMPORT_QUEUE, APP_PURCHASE_QUEUE
from .real_app import (
    OUTAGE_CARD,
    TASK_ATTEMPTS,
    App,
    dead_letters,
    import_session,
    order,
    run_app,
)

pytestmark = pytest.mark.integration

WITHIN = 30


@dataclass(frozen=True)
class Traced:
    app: App
    otlp: OtlpReceiver
    telemetry: Telemetry

    def task_spans(self, trace_id: str, count: int) -> list[Span]:
        """The task spans of ``trace_id``, once ``count`` of them are at the endpoint (the
        last task's span ends after the mail it sends, when its message is settled)."""

        def exported() -> list[Span] | None:
            self.telemetry.flush()
            spans = [
                s for s in self.otlp.spans(trace_id) if s.attributes.get("pipeline") == "purchase"
            ]
            return spans if len(spans) >= count else None

        return list(wait_for(exported, timeout=WITHIN, what=f"{count} task spans"))


@pytest.fixture
def traced(servicebus_connection_string: str, azurite_connection_string: str) -> Iterator[Traced]:
    shared_logger = logging.getLogger("shared")
    level = shared_logger.level
    shared_logger.setLevel(logging.INFO)
    with run_otlp_receiver() as otlp:
        telemetry = configure_telemetry({"OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint})
        use_telemetry(telemetry)
        try:
            with run_app(servicebus_connection_string, azurite_connection_string) as app:
                yield Traced(app, otlp, telemetry)
        finally:
            telemetry.shutdown()
            use_telemetry(None)
            shared_logger.setLevel(level)


def caller_span() -> SpanContext:
    """The span an order's messages are sent in (the API's, for an order it accepts)."""
    return SpanContext(
        trace_id=random.getrandbits(128),
        span_id=random.getrandbits(64),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )


def stocked_sku(app: App) -> str:
    run = uuid.uuid4().hex[:8]
    sku = f"TRACE-{run}"
    app.send(APP_IMPORT_QUEUE, f"import-{run}", import_session(f"import-{run}", [sku]))
    wait_for(lambda: app.imported(sku), timeout=WITHIN, what="the product imported")
    return sku


def test_one_order_is_one_trace_of_five_task_spans_in_order(traced: Traced) -> None:
    app, otlp = traced.app, traced.otlp
    sku = stocked_sku(app)
    caller = caller_span()
    trace_id = trace.format_trace_id(caller.trace_id)
    job = f"order-{uuid.uuid4().hex[:8]}"

    app.send(APP_PURCHASE_QUEUE, job, purchase_messages(job, order(sku)), trace_properties(caller))
    wait_for(lambda: app.receipt(job), timeout=WITHIN, what="the receipt mailed")

    spans = traced.task_spans(trace_id, len(PURCHASE_TASKS))
    assert [s.name for s in spans] == list(PURCHASE_TASKS)
    for step, (span, task) in enumerate(zip(spans, PURCHASE_TASKS, strict=True), start=1):
        assert span.parent_span_id == trace.format_span_id(caller.span_id)
        assert span.kind == ProtoSpan.SPAN_KIND_CONSUMER
        assert span.status_code != ProtoStatus.STATUS_CODE_ERROR
        assert span.attributes == {
            "messaging.system": "servicebus",
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "messaging.destination.name": APP_PURCHASE_QUEUE,
            "messaging.message.id": f"{job}:{step}",
            "messaging.servicebus.disposition_status": "complete",
            "pipeline": "purchase",
            "session.id": job,
            "step": step,
            "task": task,
            "attempt": 1,
            "outcome": "completed",
        }
        assert span.resource["service.name"] == "servicebus-session-pipelines"
        assert span.resource["service.instance.id"]
    # One after the other: each task ran after the one before it was settled.
    assert all(a.end_ns <= b.start_ns for a, b in itertools.pairwise(spans))

    # Every log record of the five invocations is in its task's span.
    by_span = {s.span_id: s.name for s in spans}
    records = [r for r in otlp.logs() if f"session={job}" in str(r.body)]
    assert {by_span.get(r.span_id) for r in records} == set(PURCHASE_TASKS)
    assert all(r.trace_id == trace_id for r in records)

    durations = {p.attributes["task"]: p for p in otlp.metric("pipeline.task.duration")}
    assert all(durations[task].count for task in PURCHASE_TASKS)
    assert durations["SendReceiptEmail"].attributes["outcome"] == "completed"
    completed = [
        p
        for p in otlp.metric("pipeline.sessions.completed")
        if p.attributes == {"pipeline": "purchase"}
    ]
    assert [p.value for p in completed] == [1]
    in_flight = [
        p
        for p in otlp.metric("pipeline.sessions.in_flight")
        if p.attributes == {"pipeline": "purchase"}
    ]
    assert [p.value for p in in_flight] == [0]  # opened by the first task, closed by the last
    assert ("/v1/traces", "application/x-protobuf") in {(p, t) for p, t, _ in otlp.requests}


def test_a_failed_order_says_in_its_trace_where_and_why_and_its_dead_letters_keep_it(
    traced: Traced,
) -> None:
    app, otlp = traced.app, traced.otlp
    sku = stocked_sku(app)
    caller = caller_span()
    trace_id = trace.format_trace_id(caller.trace_id)
    job = f"order-{uuid.uuid4().hex[:8]}"

    messages = purchase_messages(job, order(sku, card=OUTAGE_CARD))
    app.send(APP_PURCHASE_QUEUE, job, messages, trace_properties(caller))
    letters = wait_for(
        lambda: len(found := dead_letters(app, job)) == 3 and found,
        timeout=WITHIN,
        what="the payment and the two tasks after it dead-lettered",
    )
    spans = traced.task_spans(trace_id, 5)
    outcomes = [
        (s.name, s.attributes["outcome"], s.attributes.get("dead_letter.reason")) for s in spans
    ]
    assert outcomes == [
        ("GenerateOrderNumber", "completed", None),
        ("CalculateTotal", "completed", None),
        ("ProcessPayment", "dead-lettered", "PaymentProviderUnavailable"),
        ("GenerateReceipt", "dead-lettered", "SessionFailed"),
        ("SendReceiptEmail", "dead-lettered", "SessionFailed"),
    ]
    payment = spans[2]  # its attempts all in one invocation, holding the session
    assert payment.attributes["attempt"] == TASK_ATTEMPTS
    assert payment.attributes["error.type"] == "PaymentProviderUnavailable"
    assert payment.attributes["messaging.servicebus.disposition_status"] == "dead_letter"
    assert payment.status_code == ProtoStatus.STATUS_CODE_ERROR
    assert payment.status_message.startswith("Gave up: the payment provider was out of reach")
    failed = otlp.metric("pipeline.sessions.failed")
    assert [(p.attributes, p.value) for p in failed] == [
        (
            {
                "pipeline": "purchase",
                "task": "ProcessPayment",
                "reason": "PaymentProviderUnavailable",
            },
            1,
        )
    ]
    # The dead letters keep the properties they were sent with, the order's trace among them.
    assert {trace_id_of(letter.application_properties) for letter in letters} == {trace_id}
