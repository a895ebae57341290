"""One order, one trace, through the whole local stack exporting to a real OTLP/HTTP endpoint
(localdev/otlp_receiver.py decodes the protobuf requests): the POST continues the caller's
trace and each task of the order is a span under it; a failed order's archived session keeps
its trace id; its replay is a span linked to that trace, with the replayed tasks under it."""

from __future__ import annotations

import random
import uuid

from opentelemetry import trace
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.trace import SpanContext, TraceFlags

from localdev.otlp_receiver import Span
from shared.domain.pipelines import PURCHASE_TASKS
from shared.telemetry.context import trace_properties

from .conftest import E2E, order, wait_for


def submit(e2e: E2E, document: dict, headers: dict[str, str] | None = None) -> str:
    response = e2e.api.request(
        "POST",
        "orders",
        body=document,
        headers={"Idempotency-Key": uuid.uuid4().hex, **(headers or {})},
    )
    assert response.status == 202, response.body
    return str(response.json()["job_id"])


def task_spans(e2e: E2E, session_id: str, count: int) -> list[Span]:
    """The task spans of one session, once ``count`` of them are exported."""

    def exported() -> list[Span] | None:
        e2e.exported()
        found = [s for s in e2e.otlp.spans() if s.attributes.get("session.id") == session_id]
        return found if len(found) >= count else None

    return list(wait_for(exported, what=f"{count} task spans of {session_id}"))


def exported_archive_run(e2e: E2E, dead_letters: int) -> bool:
    """An archive run's span, and at least ``dead_letters`` counted as archived, are exported."""
    e2e.exported()
    runs = [s for s in e2e.otlp.spans() if s.name == "archive dead letters"]
    archived = e2e.otlp.metric("pipeline.dead_letters.archived")
    return bool(runs) and sum(p.value or 0 for p in archived) >= dead_letters


def only(spans: list[Span], name: str) -> Span:
    (span,) = [s for s in spans if s.name == name]
    return span


def test_one_order_is_one_trace_holding_the_post_and_its_five_tasks_in_order(
    e2e: E2E, catalogue: None
) -> None:
    caller = SpanContext(random.getrandbits(128), random.getrandbits(64), True, TraceFlags(1))
    job = submit(e2e, order(), headers=trace_properties(caller))
    wait_for(lambda: e2e.receipt_mail(job), what="the receipt")

    tasks = task_spans(e2e, job, len(PURCHASE_TASKS))
    trace_id = trace.format_trace_id(caller.trace_id)
    assert {s.trace_id for s in tasks} == {trace_id}
    spans = e2e.otlp.spans(trace_id)
    post = only(spans, "POST /api/orders")
    assert post.parent_span_id == trace.format_span_id(caller.span_id)
    assert post.kind == ProtoSpan.SPAN_KIND_SERVER
    assert post.attributes["http.response.status_code"] == 202
    assert [s.name for s in tasks] == list(PURCHASE_TASKS)
    for step, span in enumerate(tasks, start=1):
        assert span.parent_span_id == post.span_id
        assert span.start_ns >= post.start_ns
        assert {
            key: span.attributes[key]
            for key in ("messaging.system", "messaging.destination.name", "step", "outcome")
        } == {
            "messaging.system": "servicebus",
            "messaging.destination.name": e2e.purchase_queue,
            "step": step,
            "outcome": "completed",
        }
        assert span.attributes["messaging.message.id"] == f"{job}:{step}"


def test_an_order_without_a_caller_trace_starts_one_at_the_post(e2e: E2E, catalogue: None) -> None:
    job = submit(e2e, order())
    wait_for(lambda: e2e.receipt_mail(job), what="the receipt")

    tasks = task_spans(e2e, job, len(PURCHASE_TASKS))
    (trace_id,) = {s.trace_id for s in tasks}
    post = only(e2e.otlp.spans(trace_id), "POST /api/orders")
    assert post.parent_span_id == ""
    assert {s.parent_span_id for s in tasks} == {post.span_id}


def test_a_failed_order_keeps_its_trace_in_the_archive_and_its_replay_links_to_it(
    e2e: E2E, catalogue: None, outage: str
) -> None:
    job = submit(e2e, order(outage))
    session = e2e.archived_session(job)
    failed = task_spans(e2e, job, 1)
    (trace_id,) = {s.trace_id for s in failed}
    assert session["trace_id"] == trace_id
    # The archive run writes the session's rows before it completes their dead letters,
    # counts them, and ends its span after the last queue: both may come after the GET.
    wait_for(
        lambda: exported_archive_run(e2e, session["message_count"]),
        what="an archive run's span and its count of the session's dead letters",
    )

    e2e.payments.reset_outage()
    replay = e2e.api.replay(job, idempotency_key=f"fix-{job}")
    new_session = replay["new_session_id"]
    wait_for(lambda: e2e.receipt_mail(job), what="the replayed receipt")

    replayed = task_spans(e2e, new_session, replay["sent"])
    (replay_trace,) = {s.trace_id for s in replayed}
    assert replay_trace != trace_id
    spans = e2e.otlp.spans(replay_trace)
    request = only(spans, "POST /api/failed-sessions/{session_id}/replay")
    replay_span = only(spans, "replay session")
    assert replay_span.parent_span_id == request.span_id
    assert {t for t, _ in replay_span.links} == {trace_id}
    assert {s.parent_span_id for s in replayed} == {replay_span.span_id}
    sent = e2e.otlp.metric("pipeline.replays.sent")
    assert sum(p.value or 0 for p in sent) >= replay["sent"]
