"""The trace sampling Azure runs (infra/app/function.bicep's ``OTEL_TRACES_SAMPLER`` settings),
read where Application Insights would read it: the Azure Monitor exporter, set up exactly as in
Azure through shared/telemetry/exporters.py (or by the Functions worker,
``azure_functions_runtime.otel.initialize_azure_monitor``, as with
``PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY``), posts its envelopes to a local endpoint that
speaks the ingestion protocol (``POST <IngestionEndpoint>/v2.1/track``, a JSON array of
envelopes, answered with ``itemsReceived``/``itemsAccepted``).

A burst of orders runs through the purchase pipeline (the processor, the task spans, the
archive of the dead letters, with in-memory twins for the ports) as fast as one process runs
them, far above the distro's default 5 traces/s: every order's trace arrives, and the trace id
the archive keeps for each failed session names a trace that arrived, holding the failed task.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
ORDERS = 120  # about 720 spans; one process runs them far faster than 5 orders/s

SCRIPT = """
import json, sys
from decimal import Decimal

if sys.argv[1] == "worker":  # the Python worker sets up the distro before it loads the app
    from azure_functions_runtime.otel import initialize_azure_monitor
    initialize_azure_monitor()

from opentelemetry import trace
from shared.domain.orders import parse_order
from shared.domain.pipelines import PURCHASE, purchase_messages
from shared.domain.products import Product
from shared.service_layer.dead_letters import archive_dead_letters
from shared.service_layer.processor import (
    FailurePolicy, IncomingMessage, Outcome, RetryPolicy, SessionProcessor,
)
from shared.service_layer.purchase_tasks import PurchaseDependencies, purchase_tasks
from shared.service_layer.receipt_mailer import ReceiptMailer
from shared.telemetry.context import sending_trace_properties
from shared.telemetry.operations import request_span
from shared.telemetry.setup import telemetry
from shared.service_layer.task_telemetry import task_invocation
from tests.builders import dead_letter, order_document
from tests.fakes import (
    InMemoryDeadLetterArchive, InMemoryDeadLetterQueue, InMemoryEmailSender,
    InMemoryOrderNumbers, InMemoryPaymentGateway, InMemoryProductCatalog,
    InMemoryReceiptEmails, InMemoryReceiptRenderer, InMemoryReceiptStore,
    InMemorySessionActions,
)

QUEUE = "purchase-tasks"
current = telemetry()
processor = SessionProcessor(
    pipeline=PURCHASE,
    tasks=purchase_tasks(PurchaseDependencies(
        order_numbers=InMemoryOrderNumbers(),
        catalog=InMemoryProductCatalog([Product("TEA", "Tea", Decimal("3.00"), "EUR")]),
        payments=InMemoryPaymentGateway(decline_tokens={"tok_declined"}),
        receipts=InMemoryReceiptStore(),
        renderer=InMemoryReceiptRenderer(),
        mailer=ReceiptMailer(InMemoryReceiptEmails(), InMemoryEmailSender()),
        tax_rate=Decimal("0.25"),
        shipping_fee=Decimal("4.95"),
    )),
    policy=FailurePolicy.STOP_ON_FAILURE,
    retry=RetryPolicy(window=0),
    sleep=lambda seconds: None,
)
dead_letters = InMemoryDeadLetterQueue()
orders = {}
for n in range(int(sys.argv[2])):
    job = f"job-{n:04d}"
    changes = {"lines": [{"sku": "TEA", "quantity": 1}]}
    if n % 5 == 0:
        changes["card_token"] = "tok_declined"  # fails at ProcessPayment
    elif n % 7 == 0:
        changes["lines"] = [{"sku": "NO-SUCH-TEA", "quantity": 1}]  # fails at CalculateTotal
    # POST /api/orders: the order's five messages are sent inside the request's span.
    with request_span("POST", "/api/orders", {}) as note:
        messages = purchase_messages(job, parse_order(order_document(**changes)))
        sent_in = sending_trace_properties()
        note(**{"http.response.status_code": 202})
    orders[job] = sent_in["traceparent"].split("-")[1]
    actions = InMemorySessionActions()
    for message in messages:
        properties = {**message.application_properties(), **sent_in}
        incoming = IncomingMessage(
            body=message.to_json(), session_id=job, message_id=message.message_id(),
            application_properties=properties,
        )
        while True:
            with task_invocation(pipeline=PURCHASE, queue=QUEUE, incoming=incoming) as record:
                result = processor.handle(incoming, actions)
                record(result)
            if result.outcome is not Outcome.ABANDONED:
                break
        if actions.last_settlement[0] == "dead_letter":
            _, reason, description = actions.last_settlement
            dead_letters.add(dead_letter(
                message, reason, queue=QUEUE, session_id=job, description=description,
                extra_properties=sent_in,
            ))
archive = InMemoryDeadLetterArchive()
archive_dead_letters(dead_letters, archive, queues=[QUEUE], max_messages=10_000)
current.flush()
print(json.dumps({
    "orders": orders,
    "failed": {s.session_id: [s.trace_id, s.failed_task] for s in archive.summaries.values()},
    "sampler": type(trace.get_tracer_provider().sampler).__name__,
}))
"""


@dataclass
class Ingestion:
    """What the exporter sent to ``/v2.1/track``: its envelopes, as Application Insights
    ingests them."""

    envelopes: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def connection_string(self, port: int) -> str:
        endpoint = f"http://127.0.0.1:{port}/"
        return (
            "InstrumentationKey=00000000-0000-0000-0000-000000000000;"
            f"IngestionEndpoint={endpoint};LiveEndpoint={endpoint}"
        )

    def traces(self) -> dict[str, list[dict[str, Any]]]:
        """The received spans (requests and dependencies) by operation id (the trace id)."""
        found: dict[str, list[dict[str, Any]]] = {}
        with self.lock:
            for envelope in self.envelopes:
                if envelope["data"]["baseType"] in ("RequestData", "RemoteDependencyData"):
                    found.setdefault(envelope["tags"]["ai.operation.id"], []).append(envelope)
        return found


@contextmanager
def run_ingestion() -> Iterator[tuple[Ingestion, int]]:
    ingestion = Ingestion()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            answer: dict[str, Any] = {}
            if self.path.endswith("/v2.1/track"):
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                envelopes = json.loads(body)
                with ingestion.lock:
                    ingestion.envelopes.extend(envelopes)
                answer = {"itemsReceived": len(envelopes), "itemsAccepted": len(envelopes)}
                answer["errors"] = []
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield ingestion, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def azure_sampler_settings() -> dict[str, str]:
    """The sampler settings infra/app/function.bicep gives the Function App."""
    text = (ROOT / "infra" / "app" / "function.bicep").read_text()
    settings = dict(re.findall(r"^\s*\{ name: '([^']+)', value: '([^']*)' \}$", text, re.M))
    return {k: v for k, v in settings.items() if k.startswith("OTEL_TRACES_SAMPLER")}


def run_burst(
    mode: str, sampler: dict[str, str], connection: str, *, orders: int = ORDERS
) -> dict[str, Any]:
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "APPLICATION", "PYTHON_"))
    }
    environ = {
        **clean,
        **sampler,
        "APPLICATIONINSIGHTS_CONNECTION_STRING": connection,
        # Nothing but the track calls leaves the process: no statsbeat, no OneSettings.
        "APPLICATIONINSIGHTS_STATSBEAT_DISABLED_ALL": "true",
        "APPLICATIONINSIGHTS_CONTROLPLANE_DISABLED": "true",
    }
    if mode == "worker":
        environ["PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY"] = "true"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode, str(orders)],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_azure_sets_a_sampler_that_keeps_every_trace() -> None:
    assert azure_sampler_settings() == {
        "OTEL_TRACES_SAMPLER": "microsoft.fixed_percentage",
        "OTEL_TRACES_SAMPLER_ARG": "1.0",
    }


@pytest.mark.parametrize("mode", ["worker", "app"])
def test_a_burst_of_orders_keeps_every_trace_and_every_failed_sessions_trace_resolves(
    mode: str,
) -> None:
    with run_ingestion() as (ingestion, port):
        burst = run_burst(mode, azure_sampler_settings(), ingestion.connection_string(port))
        traces = ingestion.traces()

    # Application Insights' own ratio sampler at 1.0, not the distro's 5 traces/s default.
    assert burst["sampler"] == "ApplicationInsightsSampler"
    # Every order is one trace: its POST and its tasks (five, or up to the failure and the
    # SessionFailed dead letters after it), all received.
    missing = [job for job, trace_id in burst["orders"].items() if trace_id not in traces]
    assert missing == []
    for trace_id in burst["orders"].values():
        names = [e["data"]["baseData"]["name"] for e in traces[trace_id]]
        assert names.count("POST /api/orders") == 1
        assert len(names) == 6
    # Every failed session's trace id (what the console shows) names a received trace, and
    # the failed task is in it, unsuccessful.
    failed = burst["failed"]
    assert len(failed) == len([n for n in range(ORDERS) if n % 5 == 0 or n % 7 == 0])
    for session_id, (trace_id, failed_task) in failed.items():
        assert trace_id == burst["orders"][session_id]
        spans = traces[trace_id]
        assert any(
            e["data"]["baseData"]["name"] == failed_task
            and e["data"]["baseData"]["success"] is False
            for e in spans
        ), session_id


def test_without_the_setting_the_distro_would_rate_limit_to_five_traces_a_second() -> None:
    """Why infra sets the sampler: unset, azure-monitor-opentelemetry 1.8 installs its
    rate-limited sampler (``_default_sampling_ratio``: 5 traces/s)."""
    with run_ingestion() as (ingestion, port):
        burst = run_burst("app", {}, ingestion.connection_string(port), orders=1)
    assert burst["sampler"] == "RateLimitedSampler"
