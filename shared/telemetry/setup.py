"""What this worker process exports, decided once from its environment (docs/telemetry.md).

- ``APPLICATIONINSIGHTS_CONNECTION_STRING``: traces, metrics and logs go to Application
  Insights through the Azure Monitor distro, with Entra auth when
  ``APPLICATIONINSIGHTS_AUTHENTICATION_STRING`` names a managed identity (the distro reads it).
  With ``PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY=true`` the Functions worker configures the
  distro itself before it loads the app, and the app uses the worker's providers.
- ``OTEL_EXPORTER_OTLP_ENDPOINT``: the same over OTLP/HTTP protobuf (``/v1/traces``,
  ``/v1/metrics``, ``/v1/logs`` under it). Both variables: both destinations.
- Neither, or ``OTEL_SDK_DISABLED=true``: nothing. No SDK is loaded, ``Telemetry.tracer`` is
  None and the instrumentation returns at its first check.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping

from .plan import DISABLED, ExportPlan, Telemetry

CONNECTION_STRING = "APPLICATIONINSIGHTS_CONNECTION_STRING"
OTLP_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
SDK_DISABLED = "OTEL_SDK_DISABLED"
WORKER_CONFIGURES_DISTRO = "PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY"


def export_plan(environ: Mapping[str, str]) -> ExportPlan:
    if _true(environ.get(SDK_DISABLED)):
        return ExportPlan()
    connection_string = environ.get(CONNECTION_STRING, "").strip()
    return ExportPlan(
        connection_string=connection_string,
        otlp_endpoint=environ.get(OTLP_ENDPOINT, "").strip().rstrip("/"),
        distro_configured_by_worker=bool(connection_string)
        and _true(environ.get(WORKER_CONFIGURES_DISTRO)),
    )


def configure_telemetry(environ: Mapping[str, str]) -> Telemetry:
    """Set up the exporters ``environ`` asks for (see the module's table). Loads the
    OpenTelemetry SDK only when something is exported."""
    plan = export_plan(environ)
    if not plan.exports:
        return DISABLED
    from .exporters import start_exporting

    return start_exporting(plan, environ)


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
