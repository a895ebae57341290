"""shared.telemetry without a network: what is exported for which environment, trace context on
message properties, where a task span hangs in its trace, and the path that exports nothing.
Spans are read from the SDK's in-memory exporter here; tests/localdev/test_app_traces.py reads
them from a real OTLP endpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import azure.functions as func
import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, StatusCode, TraceFlags

from shared.domain.confirmations import Selection
from shared.domain.envelope import TaskMessage
from shared.entrypoints.console.frame import console_static
from shared.entrypoints.http import traced
from shared.service_layer.bulk_replay import request_bulk_replay, run_bulk_replay
from shared.service_layer.operator_actions import edit_and_replay
from shared.service_layer.ports import DeadLetter
from shared.service_layer.session_messages import IncomingMessage, Outcome, Result
from shared.service_layer.task_telemetry import task_invocation
from shared.telemetry.context import (
    DIAGNOSTIC_ID,
    TRACEPARENT,
    TRACESTATE,
    message_span_context,
    trace_id_of,
    trace_properties,
)
from shared.telemetry.metrics import PipelineMetrics
from shared.telemetry.operations import (
    count_archived,
    count_replayed,
    operation_span,
    request_span,
)
from shared.telemetry.plan import ExportPlan, Telemetry
from shared.telemetry.setup import export_plan, use_telemetry
from tests import builders
from tests.builders import PIPELINES
from tests.fakes import (
    InMemoryAuditTrail,
    InMemoryReplayRequests,
    InMemoryResender,
    InMemorySessionSeeder,
    archive_holding,
)

ROOT = Path(__file__).resolve().parents[2]
CONNECTION = "InstrumentationKey=00000000-0000-0000-0000-000000000000"


def span_context(trace_id: int, span_id: int) -> SpanContext:
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(1))


# -- what is exported ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("environ", "plan"),
    [
        ({}, ExportPlan()),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": " "}, ExportPlan()),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318/"},
            ExportPlan(otlp_endpoint="http://127.0.0.1:4318"),
        ),
        ({"APPLICATIONINSIGHTS_CONNECTION_STRING": CONNECTION}, ExportPlan(CONNECTION)),
        (
            {
                "APPLICATIONINSIGHTS_CONNECTION_STRING": CONNECTION,
                "PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY": "True",
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
            },
            ExportPlan(CONNECTION, "http://collector:4318", distro_configured_by_worker=True),
        ),
        # The worker's setting alone exports nothing: the worker needs a connection string.
        ({"PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY": "true"}, ExportPlan()),
        (
            {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
            ExportPlan(),
        ),
    ],
)
def test_the_environment_decides_what_is_exported(
    environ: dict[str, str], plan: ExportPlan
) -> None:
    assert export_plan(environ) == plan
    assert export_plan(environ).exports == bool(plan.connection_string or plan.otlp_endpoint)


def test_the_plan_holds_every_telemetry_setting_the_app_reads() -> None:
    plan = export_plan(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
            "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://logs:4318/custom",
            "OTEL_TRACES_SAMPLER": "microsoft.fixed_percentage",
            "OTEL_TRACES_SAMPLER_ARG": "0.25",
            "WEBSITE_SITE_NAME": "func-shop",
        }
    )

    assert [plan.otlp_url(s) for s in ("traces", "metrics", "logs")] == [
        "http://collector:4318/v1/traces",
        "http://collector:4318/v1/metrics",
        "http://logs:4318/custom",
    ]
    assert (plan.sampling_ratio, plan.service_name) == (0.25, "func-shop")
    named = export_plan({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_SERVICE_NAME": "shop"})
    assert (named.sampling_ratio, named.service_name) == (None, "shop")


def test_exporting_nothing_loads_no_sdk_and_a_task_runs_outside_any_span() -> None:
    script = """
import json, sys
from opentelemetry import trace
from shared.entrypoints import session_tasks
from shared.service_layer.session_messages import IncomingMessage
from shared.telemetry.setup import telemetry
from shared.service_layer.task_telemetry import task_invocation
from tests.fakes import (
    InMemoryDeadLetterArchive,
    InMemoryDeadLetterQueue,
    InMemoryReplayRequests,
    InMemoryResender,
    InMemorySessionSeeder,
)

incoming = IncomingMessage(b"{}", "s", application_properties={
    "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
with task_invocation(pipeline="purchase", queue="q", incoming=incoming) as record:
    inside = trace.get_current_span().get_span_context().is_valid
print(json.dumps({
    "enabled": telemetry().tracer is not None,
    "span": inside,
    "sdk": sorted(m for m in sys.modules if m.startswith(("opentelemetry.sdk", "azure.monitor"))),
}))
"""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "APPLICATION"))}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert json.loads(done.stdout.splitlines()[-1]) == {"enabled": False, "span": False, "sdk": []}


# -- trace context on message properties ------------------------------------------------------


def test_a_span_context_rides_as_traceparent_and_diagnostic_id_and_comes_back() -> None:
    context = span_context(0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331)
    properties = trace_properties(context)

    assert properties == {
        TRACEPARENT: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        DIAGNOSTIC_ID: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    }
    back = message_span_context(properties)
    assert back is not None
    assert (back.trace_id, back.span_id, back.is_remote) == (
        context.trace_id,
        context.span_id,
        True,
    )
    assert trace_id_of(properties) == "0af7651916cd43dd8448eb211c80319c"


def test_received_properties_with_bytes_keys_and_only_a_diagnostic_id_are_read() -> None:
    traceparent = b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    found = message_span_context({b"Diagnostic-Id": traceparent, b"tracestate": b"vendor=a"})
    assert found is not None
    assert found.trace_id == 0x0AF7651916CD43DD8448EB211C80319C
    assert found.trace_state.get("vendor") == "a"
    assert trace_properties(found)[TRACESTATE] == "vendor=a"


@pytest.mark.parametrize(
    "properties",
    [
        None,
        {},
        {"task": "ProcessPayment"},
        {TRACEPARENT: "not a traceparent"},
        {TRACEPARENT: "00-00000000000000000000000000000000-b7ad6b7169203331-01"},
        {DIAGNOSTIC_ID: "|4bf92f3577b34da6a3ce929d0e0e4736.1."},  # the old Request-Id form
        {TRACEPARENT: b"\xff\xfe"},
    ],
)
def test_a_message_without_a_valid_trace_context_has_none(properties: dict | None) -> None:
    assert message_span_context(properties) is None
    assert trace_id_of(properties) is None


# -- where a task span hangs ------------------------------------------------------------------


class Recording:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.metrics = InMemoryMetricReader()
        meters = MeterProvider(metric_readers=[self.metrics])
        self.telemetry = Telemetry(
            tracer=provider.get_tracer("test"),
            metrics=PipelineMetrics(meters.get_meter("test")),
        )

    def metric(self, name: str) -> list[tuple[dict, float]]:
        data = self.metrics.get_metrics_data()
        assert data is not None
        return [
            (dict(point.attributes or {}), getattr(point, "value", getattr(point, "count", 0)))
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
        ]


@pytest.fixture
def recording() -> Iterator[Recording]:
    recorded = Recording()
    use_telemetry(recorded.telemetry)
    yield recorded
    use_telemetry(None)


class HostTrace:
    def __init__(self, context: SpanContext | None) -> None:
        self.trace_parent = trace_properties(context)[TRACEPARENT] if context else ""
        self.trace_state = ""


MESSAGE = span_context(0x1111, 0xAAAA)


def run_task(message: SpanContext | None, host: SpanContext | None) -> None:
    incoming = IncomingMessage(
        b"{}",
        "job-1",
        message_id="job-1:3",
        application_properties={
            "task": "ProcessPayment",
            **(trace_properties(message) if message else {}),
        },
    )
    with task_invocation(
        pipeline="purchase",
        queue="purchase-tasks",
        incoming=incoming,
        invocation_trace=HostTrace(host),
    ) as record:
        record(Result(Outcome.COMPLETED, task="ProcessPayment", step=3, attempt=1))


def test_a_task_span_is_a_child_of_the_context_its_message_was_sent_in(
    recording: Recording,
) -> None:
    run_task(MESSAGE, None)

    (span,) = recording.spans.get_finished_spans()
    assert span.parent is not None
    assert (span.context.trace_id, span.parent.span_id) == (MESSAGE.trace_id, MESSAGE.span_id)
    assert span.name == "ProcessPayment"
    assert span.kind is trace.SpanKind.CONSUMER
    assert list(span.links) == []


def test_a_task_span_is_a_child_of_the_hosts_span_when_the_host_traced_the_message(
    recording: Recording,
) -> None:
    host = span_context(MESSAGE.trace_id, 0xBBBB)  # the host's span, in the message's trace

    run_task(MESSAGE, host)

    (span,) = recording.spans.get_finished_spans()
    assert span.parent is not None
    assert (span.context.trace_id, span.parent.span_id) == (MESSAGE.trace_id, host.span_id)


def test_a_host_span_of_another_trace_is_linked_and_the_task_stays_in_the_orders_trace(
    recording: Recording,
) -> None:
    host = span_context(0x2222, 0xCCCC)

    run_task(MESSAGE, host)

    (span,) = recording.spans.get_finished_spans()
    assert span.parent is not None
    assert (span.context.trace_id, span.parent.span_id) == (MESSAGE.trace_id, MESSAGE.span_id)
    assert [(link.context.trace_id, link.context.span_id) for link in span.links] == [
        (host.trace_id, host.span_id)
    ]


def test_a_message_without_trace_context_starts_a_trace(recording: Recording) -> None:
    run_task(None, None)

    (span,) = recording.spans.get_finished_spans()
    assert span.parent is None


def test_an_invocation_that_raises_is_an_error_span_and_counted_as_an_error(
    recording: Recording,
) -> None:
    incoming = IncomingMessage(b"{}", "job-1", application_properties={"task": "GenerateReceipt"})
    with (
        pytest.raises(ConnectionError),
        task_invocation(pipeline="purchase", queue="q", incoming=incoming),
    ):
        raise ConnectionError("the settlement service went away")

    (span,) = recording.spans.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert [event.name for event in span.events] == ["exception"]
    assert recording.metric("pipeline.task.duration") == [
        ({"pipeline": "purchase", "task": "GenerateReceipt", "outcome": "error"}, 1)
    ]


def test_a_session_is_in_flight_from_its_first_state_to_its_settled_last_message(
    recording: Recording,
) -> None:
    incoming = IncomingMessage(b"{}", "job-1")
    results = [
        Result(Outcome.ABANDONED, "Timeout", task="First", step=1, opens_session=True),
        Result(Outcome.COMPLETED, task="First", step=1),
        Result(Outcome.COMPLETED, task="Last", step=2, ends_session=True),
    ]
    seen = []
    for result in results:
        with task_invocation(pipeline="purchase", queue="q", incoming=incoming) as record:
            record(result)
        seen.append(recording.metric("pipeline.sessions.in_flight"))

    purchase = {"pipeline": "purchase"}
    assert seen == [[(purchase, 1)], [(purchase, 1)], [(purchase, 0)]]
    assert recording.metric("pipeline.sessions.completed") == [(purchase, 1)]
    assert recording.metric("pipeline.sessions.failed") == []


# -- requests, archive runs, replays ------------------------------------------------------------


def test_a_request_span_continues_the_callers_traceparent(recording: Recording) -> None:
    caller = trace_properties(MESSAGE)[TRACEPARENT]
    with request_span("POST", "/api/orders", {"traceparent": caller}) as note:
        note(**{"http.response.status_code": 202})

    (span,) = recording.spans.get_finished_spans()
    assert span.name == "POST /api/orders"
    assert span.kind is trace.SpanKind.SERVER
    assert span.parent is not None
    assert (span.context.trace_id, span.parent.span_id) == (MESSAGE.trace_id, MESSAGE.span_id)
    assert span.attributes is not None
    assert span.attributes["http.response.status_code"] == 202


def test_a_request_without_a_traceparent_starts_a_trace(recording: Recording) -> None:
    with request_span("POST", "/api/orders", {"traceparent": "garbage"}):
        pass

    (span,) = recording.spans.get_finished_spans()
    assert span.parent is None


def test_api_and_console_requests_are_spans_named_by_their_route_templates(
    recording: Recording,
) -> None:
    @traced
    def replay(req: func.HttpRequest) -> func.HttpResponse:
        return func.HttpResponse(b"", status_code=202)

    replay(
        func.HttpRequest(
            "POST",
            "http://localhost:7071/api/failed-sessions/order%2F1/replay",
            route_params={"session_id": "order/1"},
            body=b"",
        )
    )
    stylesheet = console_static(
        func.HttpRequest(
            "GET",
            "http://localhost:7071/console/static/console.css",
            route_params={"name": "console.css"},
            body=b"",
        )
    )

    assert stylesheet.status_code == 200
    spans = recording.spans.get_finished_spans()
    assert [(s.name, (s.attributes or {}).get("http.response.status_code")) for s in spans] == [
        ("POST /api/failed-sessions/{session_id}/replay", 202),
        ("GET /console/static/{name}", 200),
    ]


def test_a_replay_links_once_to_the_trace_of_each_failed_session(recording: Recording) -> None:
    first, second = span_context(0x1, 0xA), span_context(0x2, 0xB)
    replaying = [
        trace_properties(first),
        trace_properties(span_context(0x1, 0xC)),  # another message of the first session
        trace_properties(second),
        {"task": "no trace context"},
    ]
    with operation_span("replay", attributes={"session.id": "s"}, replaying=replaying):
        pass

    (span,) = recording.spans.get_finished_spans()
    assert [(link.context.trace_id, link.context.span_id) for link in span.links] == [
        (0x1, 0xA),
        (0x2, 0xB),
    ]


def test_archived_and_replayed_messages_are_counted_by_queue(recording: Recording) -> None:
    count_archived(3, queue="purchase-tasks")
    count_archived(0, queue="purchase-tasks")
    count_replayed(2, queue="purchase-tasks")

    queue = {"messaging.destination.name": "purchase-tasks"}
    assert recording.metric("pipeline.dead_letters.archived") == [(queue, 3)]
    assert recording.metric("pipeline.replays.sent") == [(queue, 2)]


def test_an_archive_run_keeps_trace_ids_and_a_bulk_replay_links_each_session_to_its_trace(
    recording: Recording,
) -> None:
    orders = {"s-1": span_context(0x1, 0xA), "s-2": span_context(0x2, 0xB)}
    archive = archive_holding(
        *(
            dead_letter(session, step, reason, trace_properties(context))
            for session, context in orders.items()
            for step, reason in ((3, "PaymentProviderUnavailable"), (4, "SessionFailed"))
        )
    )
    requests = InMemoryReplayRequests()
    request = request_bulk_replay(
        requests, requests, Selection(reason="PaymentProviderUnavailable")
    )
    run_bulk_replay(
        requests,
        archive,
        InMemoryResender(),
        InMemorySessionSeeder(),
        request.request_id,
        audit=InMemoryAuditTrail(),
        pipelines=PIPELINES,
    )

    assert {s: archive.get_summary(s).trace_id for s in orders} == {
        "s-1": trace.format_trace_id(0x1),
        "s-2": trace.format_trace_id(0x2),
    }
    spans = {span.name: span for span in recording.spans.get_finished_spans()}
    assert recording.metric("pipeline.dead_letters.archived") == [
        ({"messaging.destination.name": "purchase-tasks"}, 4)
    ]
    archive_run, bulk = spans["archive dead letters"], spans["bulk replay"]
    assert archive_run.parent is None and bulk.parent is None
    replays = [s for s in recording.spans.get_finished_spans() if s.name == "replay session"]
    assert all(s.parent is not None and s.parent.span_id == bulk.context.span_id for s in replays)
    assert sorted(link.context.trace_id for s in replays for link in s.links) == [0x1, 0x2]
    assert recording.metric("pipeline.replays.sent") == [
        ({"messaging.destination.name": "purchase-tasks"}, 4)
    ]


def test_an_edited_replay_is_a_replay_span_counting_its_edits_and_the_edit_is_audited(
    recording: Recording,
) -> None:
    row = TaskMessage(
        "import-1",
        "product_import",
        "ImportProduct",
        3,
        False,
        {"sku": "SCALE-MINI", "name": "Kitchen scale", "price": "24.00", "currency": "EURO"},
    )
    letter = builders.dead_letter(
        row,
        "InvalidProduct:currency",
        queue="product-import-tasks",
        session_id="import-1-0000",
        extra_properties=trace_properties(span_context(0x3, 0xC)),
    )
    archive = archive_holding(letter)
    (archived,) = archive.list_session("import-1-0000")
    audit = InMemoryAuditTrail()

    edit_and_replay(
        archive,
        InMemoryResender(),
        InMemorySessionSeeder(),
        audit,
        "import-1-0000",
        {archived.row_key: archived.body.decode().replace('"EURO"', '"EUR"')},
        key="console:0123456789abcdef",
        who="operator",
        note="currency typo",
        pipelines=PIPELINES,
    )

    (span,) = [s for s in recording.spans.get_finished_spans() if s.name == "replay session"]
    assert span.attributes is not None
    assert span.attributes["replay.messages_edited"] == 1
    assert [link.context.trace_id for link in span.links] == [0x3]
    (entry,) = audit.history("import-1-0000")
    assert (entry.action, entry.note) == ("edit-and-replay", "currency typo")


def dead_letter(session: str, step: int, reason: str, trace: dict[str, str]) -> DeadLetter:
    """Step ``step`` of a four-step purchase, dead-lettered with ``reason`` from the order's
    trace (its ``trace`` properties)."""
    message = TaskMessage(f"job-{session}", "purchase", f"Task{step}", step, step == 4, {})
    return builders.dead_letter(
        message,
        reason,
        queue="purchase-tasks",
        session_id=session,
        description=reason,
        enqueued_time=None,
        sequence_number=step,
        extra_properties=trace,
    )
