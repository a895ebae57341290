"""A real OTLP/HTTP endpoint for the tests and the benchmarks: an HTTP server on 127.0.0.1 (a
free port) that takes ``POST /v1/traces``, ``/v1/metrics`` and ``/v1/logs`` with protobuf
bodies (gzip or not), as the OpenTelemetry Collector does, decodes each
``Export*ServiceRequest`` with ``opentelemetry-proto`` and keeps what it received for the
caller to read.

    with run_otlp_receiver() as otlp:
        environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint}
        ...
        spans = otlp.spans()
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

PROTOBUF = "application/x-protobuf"


@dataclass(frozen=True)
class Span:
    trace_id: str  # 32 hex digits
    span_id: str  # 16 hex digits
    parent_span_id: str  # "" for a root span
    name: str
    kind: int  # opentelemetry.proto.trace.v1.Span.SpanKind
    start_ns: int
    end_ns: int
    attributes: Mapping[str, Any]
    links: tuple[tuple[str, str], ...]  # (trace id, span id)
    status_code: int  # opentelemetry.proto.trace.v1.Status.StatusCode
    status_message: str
    resource: Mapping[str, Any]


@dataclass(frozen=True)
class LogRecord:
    trace_id: str  # "" when the record was not emitted inside a span
    span_id: str
    body: Any
    severity_text: str
    logger: str  # the instrumentation scope: the Python logger's name
    attributes: Mapping[str, Any]


@dataclass(frozen=True)
class MetricPoint:
    name: str
    unit: str
    attributes: Mapping[str, Any]
    value: float | None  # a sum or a gauge
    count: int | None = None  # a histogram's
    total: float | None = None


@dataclass
class OtlpReceiver:
    endpoint: str  # what OTEL_EXPORTER_OTLP_ENDPOINT is set to
    requests: list[tuple[str, str, int]] = field(default_factory=list)  # path, type, bytes
    _spans: list[Span] = field(default_factory=list)
    _logs: list[LogRecord] = field(default_factory=list)
    _points: list[MetricPoint] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def spans(self, trace_id: str | None = None) -> list[Span]:
        """Received spans (of ``trace_id`` when given), by start time."""
        with self._lock:
            found = [s for s in self._spans if trace_id is None or s.trace_id == trace_id]
        return sorted(found, key=lambda s: s.start_ns)

    def logs(self) -> list[LogRecord]:
        with self._lock:
            return list(self._logs)

    def metric(self, name: str) -> list[MetricPoint]:
        """The points of metric ``name`` from the latest export that had it (cumulative
        temporality: the latest export holds the totals)."""
        with self._lock:
            points = [p for p in self._points if p.name == name]
        latest: dict[tuple[tuple[str, Any], ...], MetricPoint] = {}
        for point in points:
            latest[tuple(sorted(point.attributes.items()))] = point
        return list(latest.values())

    # -- decoding ----------------------------------------------------------------------------

    def receive(self, path: str, body: bytes) -> bytes:
        """Decode one export request; the serialized response to send back."""
        if path == "/v1/traces":
            traces = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
            spans = [
                _span(span, _attributes(resource.resource.attributes))
                for resource in traces.resource_spans
                for scope in resource.scope_spans
                for span in scope.spans
            ]
            with self._lock:
                self._spans.extend(spans)
            return trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        if path == "/v1/logs":
            logs = logs_service_pb2.ExportLogsServiceRequest.FromString(body)
            records = [
                _log(record, scope.scope.name)
                for resource in logs.resource_logs
                for scope in resource.scope_logs
                for record in scope.log_records
            ]
            with self._lock:
                self._logs.extend(records)
            return logs_service_pb2.ExportLogsServiceResponse().SerializeToString()
        if path == "/v1/metrics":
            exported = metrics_service_pb2.ExportMetricsServiceRequest.FromString(body)
            points = [
                point
                for resource in exported.resource_metrics
                for scope in resource.scope_metrics
                for metric in scope.metrics
                for point in _points(metric)
            ]
            with self._lock:
                self._points.extend(points)
            return metrics_service_pb2.ExportMetricsServiceResponse().SerializeToString()
        raise LookupError(path)


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(item) for item in value.array_value.values)
    if kind == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    return getattr(value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


def _span(span: Any, resource: Mapping[str, Any]) -> Span:
    return Span(
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_span_id=span.parent_span_id.hex(),
        name=span.name,
        kind=span.kind,
        start_ns=span.start_time_unix_nano,
        end_ns=span.end_time_unix_nano,
        attributes=_attributes(span.attributes),
        links=tuple((link.trace_id.hex(), link.span_id.hex()) for link in span.links),
        status_code=span.status.code,
        status_message=span.status.message,
        resource=resource,
    )


def _log(record: Any, logger: str) -> LogRecord:
    return LogRecord(
        trace_id=record.trace_id.hex(),
        span_id=record.span_id.hex(),
        body=_value(record.body),
        severity_text=record.severity_text,
        logger=logger,
        attributes=_attributes(record.attributes),
    )


def _points(metric: Any) -> Iterator[MetricPoint]:
    kind = metric.WhichOneof("data")
    if kind in ("sum", "gauge"):
        for point in getattr(metric, kind).data_points:
            number = point.as_int if point.WhichOneof("value") == "as_int" else point.as_double
            yield MetricPoint(metric.name, metric.unit, _attributes(point.attributes), number)
    elif kind == "histogram":
        for point in metric.histogram.data_points:
            yield MetricPoint(
                metric.name,
                metric.unit,
                _attributes(point.attributes),
                None,
                count=point.count,
                total=point.sum,
            )


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        content_type = self.headers.get_content_type()
        if content_type != PROTOBUF:
            self._answer(415, b"OTLP/HTTP bodies are application/x-protobuf here")
            return
        if (self.headers.get("Content-Encoding") or "").lower() == "gzip":
            body = gzip.decompress(body)
        receiver = self.server.receiver
        try:
            answer = receiver.receive(self.path, body)
        except LookupError:
            self._answer(404, b"")
            return
        except Exception as error:  # a body that does not decode is the exporter's bug
            self._answer(400, str(error).encode())
            return
        with receiver._lock:
            receiver.requests.append((self.path, content_type, len(body)))
        self._answer(200, answer, PROTOBUF)

    def _answer(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    receiver: OtlpReceiver


@contextmanager
def run_otlp_receiver() -> Iterator[OtlpReceiver]:
    """An OTLP/HTTP endpoint on 127.0.0.1 for the duration of the ``with``."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.receiver = OtlpReceiver(f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, name="otlp-receiver", daemon=True)
    thread.start()
    try:
        yield server.receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
