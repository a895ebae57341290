"""The OpenTelemetry SDK's side: providers and exporters for an ``ExportPlan``. Imported only
when something is exported, so a process that exports nothing never loads the SDK."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import _logs, metrics, trace
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.logging.handler import LoggingHandler
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import Sampler

from .metrics import PipelineMetrics
from .plan import INSTRUMENTATION_NAME, ExportPlan, Telemetry

DEFAULT_SERVICE_NAME = "servicebus-session-pipelines"
# The sampler settings (infra/app/function.bicep keeps every trace; docs/telemetry.md).
TRACES_SAMPLER = "OTEL_TRACES_SAMPLER"
TRACES_SAMPLER_ARG = "OTEL_TRACES_SAMPLER_ARG"
FIXED_PERCENTAGE_SAMPLER = "microsoft.fixed_percentage"
# The OTLP exporters' own variables for one signal's full URL, which win over the base endpoint.
_SIGNAL_ENDPOINTS = {
    "traces": "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "metrics": "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "logs": "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
}


def start_exporting(plan: ExportPlan, environ: Mapping[str, str]) -> Telemetry:
    if plan.connection_string:
        return _azure_monitor(plan, environ)
    return _otlp_only(plan, environ)


def _otlp_only(plan: ExportPlan, environ: Mapping[str, str]) -> Telemetry:
    resource = Resource.create(_resource_attributes(environ))
    tracer_provider = TracerProvider(resource=resource, sampler=_sampler(environ))
    tracer_provider.add_span_processor(_otlp_spans(plan, environ))
    meter_provider = MeterProvider(resource=resource, metric_readers=[_otlp_metrics(plan, environ)])
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(_otlp_logs(plan, environ))
    handler = LoggingHandler(logger_provider=logger_provider)
    logging.getLogger().addHandler(handler)
    _install_globally(tracer_provider, meter_provider, logger_provider)

    def shutdown() -> None:
        logging.getLogger().removeHandler(handler)
        for provider in (tracer_provider, meter_provider, logger_provider):
            provider.shutdown()

    return Telemetry(
        tracer=tracer_provider.get_tracer(INSTRUMENTATION_NAME),
        metrics=PipelineMetrics(meter_provider.get_meter(INSTRUMENTATION_NAME)),
        exporting=("otlp",),
        flush=_flusher(tracer_provider, meter_provider, logger_provider),
        shutdown=shutdown,
    )


def _azure_monitor(plan: ExportPlan, environ: Mapping[str, str]) -> Telemetry:
    """The distro's providers (set up here, or by the worker before it loaded the app), with
    the OTLP exporters added when an OTLP endpoint is set too."""
    if plan.distro_configured_by_worker:
        tracer_provider: Any = trace.get_tracer_provider()
        logger_provider: Any = _logs.get_logger_provider()
        if plan.otlp_endpoint:
            # The worker's meter provider takes no reader after it is built: with both
            # destinations, metrics go to Application Insights only (docs/telemetry.md).
            tracer_provider.add_span_processor(_otlp_spans(plan, environ))
            logger_provider.add_log_record_processor(_otlp_logs(plan, environ))
    else:
        from azure.monitor.opentelemetry import configure_azure_monitor

        otlp: dict[str, Any] = {}
        if plan.otlp_endpoint:
            otlp = {
                "span_processors": [_otlp_spans(plan, environ)],
                "log_record_processors": [_otlp_logs(plan, environ)],
                "metric_readers": [_otlp_metrics(plan, environ)],
            }
        configure_azure_monitor(connection_string=plan.connection_string, logger_name="", **otlp)
    tracer_provider = trace.get_tracer_provider()
    meter_provider: Any = metrics.get_meter_provider()
    logger_provider = _logs.get_logger_provider()
    exporting = ("azure-monitor", "otlp") if plan.otlp_endpoint else ("azure-monitor",)
    return Telemetry(
        tracer=tracer_provider.get_tracer(INSTRUMENTATION_NAME),
        metrics=PipelineMetrics(meter_provider.get_meter(INSTRUMENTATION_NAME)),
        exporting=exporting,
        flush=_flusher(tracer_provider, meter_provider, logger_provider),
        # The distro's providers are the process's own: they shut down when it exits.
    )


def _sampler(environ: Mapping[str, str]) -> Sampler | None:
    """Application Insights' ratio sampler when ``OTEL_TRACES_SAMPLER`` names it as the Azure
    Monitor distro does (``microsoft.fixed_percentage``, ratio ``OTEL_TRACES_SAMPLER_ARG``), so
    an OTLP-only process samples as the app does in Azure; otherwise None, and the SDK reads
    ``OTEL_TRACES_SAMPLER`` itself (a name it does not know would be a warning and its default)."""
    if environ.get(TRACES_SAMPLER) != FIXED_PERCENTAGE_SAMPLER:
        return None
    from azure.monitor.opentelemetry.exporter import ApplicationInsightsSampler

    return ApplicationInsightsSampler(sampling_ratio=float(environ.get(TRACES_SAMPLER_ARG) or 1.0))


def _otlp_spans(plan: ExportPlan, environ: Mapping[str, str]) -> BatchSpanProcessor:
    return BatchSpanProcessor(OTLPSpanExporter(endpoint=_endpoint(plan, environ, "traces")))


def _otlp_metrics(plan: ExportPlan, environ: Mapping[str, str]) -> MetricReader:
    return PeriodicExportingMetricReader(
        OTLPMetricExporter(endpoint=_endpoint(plan, environ, "metrics"))
    )


def _otlp_logs(plan: ExportPlan, environ: Mapping[str, str]) -> BatchLogRecordProcessor:
    return BatchLogRecordProcessor(OTLPLogExporter(endpoint=_endpoint(plan, environ, "logs")))


def _endpoint(plan: ExportPlan, environ: Mapping[str, str], signal: str) -> str:
    return environ.get(_SIGNAL_ENDPOINTS[signal]) or f"{plan.otlp_endpoint}/v1/{signal}"


def _resource_attributes(environ: Mapping[str, str]) -> dict[str, str]:
    """The service (``OTEL_SERVICE_NAME``, else the Function App's name) and this worker
    process, so a span says which instance ran it."""
    name = environ.get("OTEL_SERVICE_NAME") or environ.get("WEBSITE_SITE_NAME")
    return {
        "service.name": name or DEFAULT_SERVICE_NAME,
        "service.instance.id": f"{socket.gethostname()}:{os.getpid()}",
    }


def _install_globally(
    tracer_provider: TracerProvider, meter_provider: MeterProvider, logger_provider: LoggerProvider
) -> None:
    """The process's global providers, when none is set yet: libraries that trace through
    the global API (azure-core's plugin) then export through the same pipeline."""
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        trace.set_tracer_provider(tracer_provider)
    if type(metrics.get_meter_provider()).__name__ == "_ProxyMeterProvider":
        metrics.set_meter_provider(meter_provider)
    if type(_logs.get_logger_provider()).__name__ == "ProxyLoggerProvider":
        _logs.set_logger_provider(logger_provider)


def _flusher(*providers: Any) -> Callable[[], None]:
    def flush() -> None:
        for provider in providers:
            force_flush = getattr(provider, "force_flush", None)
            if force_flush is not None:
                force_flush()

    return flush
