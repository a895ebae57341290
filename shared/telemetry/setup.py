"""What this worker process exports, decided once from its environment (docs/telemetry.md):
the one place the app reads telemetry's settings.

They are not in ``shared.config.Settings``, and the composition root does not hand them over:
telemetry is decided per process before any ``Settings`` exists and without one (the Spark
job, the tools and the adapters' request metrics use it too), the Functions worker configures
the distro from the same environment before it loads the app, and the ``OTEL_*`` variables are
environment variables by the OpenTelemetry specification. ``export_plan`` reads every variable
the app interprets into an ``ExportPlan``, and ``exporters`` builds from the plan alone; the
SDK and the distro read the rest of their own variables (``OTEL_EXPORTER_OTLP_HEADERS``,
another ``OTEL_TRACES_SAMPLER``, ``OTEL_RESOURCE_ATTRIBUTES``, ...) from the process's
environment themselves.

- ``APPLICATIONINSIGHTS_CONNECTION_STRING``: traces, metrics and logs go to Application
  Insights through the Azure Monitor distro, with Entra auth when
  ``APPLICATIONINSIGHTS_AUTHENTICATION_STRING`` names a managed identity (the distro reads it).
  With ``PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY=true`` the Functions worker configures the
  distro itself before it loads the app, and the app uses the worker's providers.
- ``OTEL_EXPORTER_OTLP_ENDPOINT``: the same over OTLP/HTTP protobuf (``/v1/traces``,
  ``/v1/metrics``, ``/v1/logs`` under it). Both variables: both destinations.
- Neither, or ``OTEL_SDK_DISABLED=true``: nothing. No SDK is loaded, ``Telemetry.tracer`` is
  None and the instrumentation returns at its first check.
- ``OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT``: one signal's full OTLP URL, winning over the base.
- ``OTEL_TRACES_SAMPLER=microsoft.fixed_percentage`` (as the distro names it): Application
  Insights' ratio sampler, ratio ``OTEL_TRACES_SAMPLER_ARG``, for OTLP-only export too, so a
  process samples as the app does in Azure.
- ``OTEL_SERVICE_NAME``, else the Function App's name (``WEBSITE_SITE_NAME``): the service.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import replace

from .plan import DISABLED, ExportPlan, Telemetry

CONNECTION_STRING = "APPLICATIONINSIGHTS_CONNECTION_STRING"
OTLP_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
SDK_DISABLED = "OTEL_SDK_DISABLED"
WORKER_CONFIGURES_DISTRO = "PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY"
# The OTLP exporters' own variables for one signal's full URL.
OTLP_SIGNAL_ENDPOINTS = {
    "traces": "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "metrics": "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "logs": "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
}
# The sampler settings (infra/app/function.bicep keeps every trace; docs/telemetry.md).
TRACES_SAMPLER = "OTEL_TRACES_SAMPLER"
TRACES_SAMPLER_ARG = "OTEL_TRACES_SAMPLER_ARG"
FIXED_PERCENTAGE_SAMPLER = "microsoft.fixed_percentage"
SERVICE_NAME = "OTEL_SERVICE_NAME"
SITE_NAME = "WEBSITE_SITE_NAME"


def export_plan(environ: Mapping[str, str]) -> ExportPlan:
    """Everything the app reads of ``environ`` for telemetry (see the module's list)."""
    if _true(environ.get(SDK_DISABLED)):
        return ExportPlan()
    connection_string = environ.get(CONNECTION_STRING, "").strip()
    plan = ExportPlan(
        connection_string=connection_string,
        otlp_endpoint=environ.get(OTLP_ENDPOINT, "").strip().rstrip("/"),
        distro_configured_by_worker=bool(connection_string)
        and _true(environ.get(WORKER_CONFIGURES_DISTRO)),
    )
    if not plan.exports:
        return plan
    return replace(
        plan,
        otlp_signal_endpoints={
            signal: url
            for signal, name in OTLP_SIGNAL_ENDPOINTS.items()
            if (url := environ.get(name))
        },
        sampling_ratio=(
            float(environ.get(TRACES_SAMPLER_ARG) or 1.0)
            if environ.get(TRACES_SAMPLER) == FIXED_PERCENTAGE_SAMPLER
            else None
        ),
        service_name=environ.get(SERVICE_NAME) or environ.get(SITE_NAME) or "",
    )


def configure_telemetry(environ: Mapping[str, str]) -> Telemetry:
    """Set up the exporters ``environ`` asks for (see the module's list). Loads the
    OpenTelemetry SDK only when something is exported."""
    plan = export_plan(environ)
    if not plan.exports:
        return DISABLED
    from .exporters import start_exporting

    return start_exporting(plan)


_current: Telemetry | None = None
_lock = threading.Lock()


def telemetry() -> Telemetry:
    """This process's telemetry, set up from ``os.environ`` on first use."""
    global _current
    current = _current
    if current is not None:
        return current
    with _lock:
        if _current is None:
            _current = configure_telemetry(os.environ)
        return _current


def use_telemetry(new: Telemetry | None) -> None:
    """Install a process's telemetry (tests, the local host); ``None``: set up again from the
    environment on next use. The caller shuts down what it replaces."""
    global _current
    with _lock:
        _current = new


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"
