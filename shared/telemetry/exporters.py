"""The OpenTelemetry SDK's side: providers and exporters for an ``ExportPlan``. Imported only
when something is exported, so a process that exports nothing never loads the SDK. Everything
here comes from the plan (``setup`` reads the environment)."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
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
from .plan import DEFAULT_SERVICE_NAME, INSTRUMENTATION_NAME, ExportPlan, Telemetry


def start_exporting(plan: ExportPlan) -> Telemetry:
    if plan.connection_string:
        return _azure_monitor(plan)
    return _otlp_only(plan)


def _otlp_only(plan: ExportPlan) -> Telemetry:
    resource = Resource.create(_resource_attributes(plan))
    tracer_provider = TracerProvider(resource=resource, sampler=_sampler(plan))
    tracer_provider.add_span_processor(_otlp_spans(plan))
    meter_provider = MeterProvider(resource=resource, metric_readers=[_otlp_metrics(plan)])
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(_otlp_logs(plan))
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


def _azure_monitor(plan: ExportPlan) -> Telemetry:
    """The distro's providers (set up here, or by the worker before it loaded the app), with
    the OTLP exporters added when an OTLP endpoint is set too."""
    if plan.distro_configured_by_worker:
        tracer_provider: Any = trace.get_tracer_provider()
        logger_provider: Any = _logs.get_logger_provider()
        if plan.otlp_endpoint:
            # The worker's meter provider takes no reader after it is built: with both
            # destinations, metrics go to Application Insights only (docs/telemetry.md).
            tracer_provider.add_span_processor(_otlp_spans(plan))
            logger_provider.add_log_record_processor(_otlp_logs(plan))
    else:
        from azure.monitor.opentelemetry import configure_azure_monitor

        otlp: dict[str, Any] = {}
        if plan.otlp_endpoint:
            otlp = {
                "span_processors": [_otlp_spans(plan)],
                "log_record_processors": [_otlp_logs(plan)],
                "metric_readers": [_otlp_metrics(plan)],
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


def _sampler(plan: ExportPlan) -> Sampler | None:
    """Application Insights' ratio sampler when the plan has a ratio (the distro's
    ``microsoft.fixed_percentage``), so an OTLP-only process samples as the app does in Azure;
    otherwise None, and the SDK reads ``OTEL_TRACES_SAMPLER`` itself (a name it does not know
    would be a warning and its default)."""
    if plan.sampling_ratio is None:
        return None
    from azure.monitor.opentelemetry.exporter import ApplicationInsightsSampler

    return ApplicationInsightsSampler(sampling_ratio=plan.sampling_ratio)


def _otlp_spans(plan: ExportPlan) -> BatchSpanProcessor:
    return BatchSpanProcessor(OTLPSpanExporter(endpoint=plan.otlp_url("traces")))


def _otlp_metrics(plan: ExportPlan) -> MetricReader:
    return PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=plan.otlp_url("metrics")))


def _otlp_logs(plan: ExportPlan) -> BatchLogRecordProcessor:
    return BatchLogRecordProcessor(OTLPLogExporter(endpoint=plan.otlp_url("logs")))


def _resource_attributes(plan: ExportPlan) -> dict[str, str]:
    """The service and this worker process, so a span says which instance ran it."""
    return {
        "service.name": plan.service_name or DEFAULT_SERVICE_NAME,
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
