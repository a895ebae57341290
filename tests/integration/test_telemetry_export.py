"""What a worker process exports, read at a real OTLP/HTTP endpoint
(localdev/otlp_receiver.py).

The Application Insights case runs as in Azure with PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY:
the worker set up the process's providers before the app loaded (here: a process that sets SDK
providers of its own, exporting nowhere, since Application Insights cannot be reached from this
machine); the app uses them, and an OTLP endpoint set as well gets the traces and logs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from localdev.otlp_receiver import run_otlp_receiver

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import logging, sys
from opentelemetry import _logs, metrics, trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider

if sys.argv[1] == "worker-distro":  # what the worker's distro set up: the process's providers
    trace.set_tracer_provider(TracerProvider())
    metrics.set_meter_provider(MeterProvider())
    _logs.set_logger_provider(LoggerProvider())

from shared.service_layer.session_messages import IncomingMessage, Outcome, Result
from shared.telemetry.setup import telemetry
from shared.service_layer.task_telemetry import task_invocation

logging.getLogger("shared").setLevel(logging.INFO)
current = telemetry()
incoming = IncomingMessage(b"{}", "job-9", message_id="job-9:1", application_properties={
    "task": "GenerateOrderNumber",
    "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
})
with task_invocation(pipeline="purchase", queue="purchase-tasks", incoming=incoming) as record:
    if sys.argv[1] == "worker-distro":
        # The worker's logging handler, as the distro installs it on the root logger.
        from opentelemetry.instrumentation.logging.handler import LoggingHandler
        logging.getLogger().addHandler(LoggingHandler())
    logging.getLogger("shared.test").info("inside the task of job-9")
    record(Result(Outcome.COMPLETED, task="GenerateOrderNumber", step=1, attempt=1))
current.flush()
print(",".join(current.exporting))
"""


def export(mode: str, environ: dict[str, str]) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "APPLICATION"))}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode],
        cwd=ROOT,
        env={**clean, **environ},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("mode", "settings", "exporting"),
    [
        ("otlp", {}, "otlp"),
        # Azure's sampler settings (local.settings.json.example has them too): an OTLP-only
        # process samples as the app does in Azure, every trace kept.
        (
            "otlp",
            {"OTEL_TRACES_SAMPLER": "microsoft.fixed_percentage", "OTEL_TRACES_SAMPLER_ARG": "1.0"},
            "otlp",
        ),
        (
            "worker-distro",
            {
                "APPLICATIONINSIGHTS_CONNECTION_STRING": "InstrumentationKey=0",
                "PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY": "true",
            },
            "azure-monitor,otlp",
        ),
    ],
)
def test_a_task_span_and_its_log_record_reach_the_otlp_endpoint(
    mode: str, settings: dict[str, str], exporting: str
) -> None:
    with run_otlp_receiver() as otlp:
        assert export(mode, {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint, **settings}) == exporting

        (span,) = otlp.spans()
        assert (span.name, span.trace_id) == (
            "GenerateOrderNumber",
            "0af7651916cd43dd8448eb211c80319c",
        )
        assert span.parent_span_id == "b7ad6b7169203331"
        (record,) = [r for r in otlp.logs() if r.body == "inside the task of job-9"]
        assert (record.trace_id, record.span_id) == (span.trace_id, span.span_id)
        assert record.logger == "shared.test"


def test_a_signals_own_endpoint_wins_over_the_base_endpoint() -> None:
    with run_otlp_receiver() as otlp, run_otlp_receiver() as traces_only:
        export(
            "otlp",
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint,
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{traces_only.endpoint}/v1/traces",
            },
        )

        assert [s.name for s in traces_only.spans()] == ["GenerateOrderNumber"]
        assert otlp.spans() == []
        assert otlp.logs()
