"""The real stack, once for the tests of this package: Azurite, the Service Bus emulator (with
the queues of infra/local/config.json), an SMTP sink and function_app.py on the local host.
Tests talk to it as users do: through the HTTP API, the storage account, the queues and the
mail it sends."""

from __future__ import annotations

import json
import logging
import re
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from azure.data.tables import TableClient
from azure.servicebus import ServiceBusClient

from localdev.api_client import AppClient
from localdev.otlp_receiver import OtlpReceiver, run_otlp_receiver
from localdev.stack import HOST_JSON, LocalStack, run_stack
from shared.adapters.azure_clients import PAYMENTS_TABLE
from shared.adapters.servicebus_sender import to_service_bus_message
from shared.adapters.simulated_payments import TableSimulatedPaymentGateway
from shared.domain.pipelines import import_message
from shared.telemetry.setup import telemetry, use_telemetry
from tests import polling

# A transient failure is tried again after half a second and given up on at its next failure
# (the window is shorter than the backoff): two attempts.
TASK_ATTEMPTS = 2
MAX_CONCURRENT_SESSIONS = 4
ARCHIVE_EVERY_SECONDS = 2
MAX_DEQUEUE_COUNT = 3

E2E_SETTINGS = {
    "DLQ_ARCHIVE_SCHEDULE": f"*/{ARCHIVE_EVERY_SECONDS} * * * * *",
    "PURGE_SCHEDULE": "0 0 0 1 1 *",  # once a year: the purge has its own tests
    "TASK_RETRY_WINDOW_SECONDS": "0.4",
    "TASK_RETRY_MIN_BACKOFF_SECONDS": "0.5",
    "TASK_RETRY_MAX_BACKOFF_SECONDS": "0.5",
    "PAYMENT_SIMULATOR_DECLINE_TOKENS": "tok_declined",
    "PAYMENT_SIMULATOR_OUTAGE_TOKENS": "",
    "FUNCTIONS_HOST_KEY": "e2e-host-key",
    "FUNCTIONS_MASTER_KEY": "e2e-master-key",
    "REPLAY_MAX_DEQUEUE_COUNT": str(MAX_DEQUEUE_COUNT),  # as host.json below says
    # The worker in the host's process (the stack's default is a process of its own): the
    # race tests hold a replay at the app's resender in this process (tests/held_replay.py),
    # and the operation counts read the app's metrics as it flushes them here. make up, make
    # demo and tests/scaleout run the worker in its own process.
    "LOCALDEV_WORKER_PROCESSES": "false",
}


def e2e_host_json(path: Path = HOST_JSON) -> dict[str, Any]:
    """host.json (``path``: another checkout's) with a lower session limit (so the tests can
    see it hold), sessions let go after 1 idle second, and storage queues polled every half
    second."""
    document = dict(json.loads(path.read_text()))
    service_bus = document["extensions"]["serviceBus"]
    service_bus["maxConcurrentSessions"] = MAX_CONCURRENT_SESSIONS
    service_bus["sessionIdleTimeout"] = "00:00:01"
    document["extensions"]["queues"].update(
        {
            "maxPollingInterval": "00:00:00.5",
            "visibilityTimeout": "00:00:00",
            "maxDequeueCount": MAX_DEQUEUE_COUNT,
        }
    )
    return document


@dataclass(frozen=True)
class Invocation:
    """One function run, from the host's "Executing"/"Executed" log lines."""

    function: str
    invocation_id: str
    reason: str
    started: float
    message_id: str | None
    session_id: str | None
    delivery_count: int | None
    ended: float | None = None
    succeeded: bool | None = None


_EXECUTING = re.compile(r"Executing 'Functions\.(\w+)' \(Reason='(.*)', Id=([\w-]+)\)")
_DETAIL = re.compile(
    r"MessageId: (\S+), SequenceNumber: \S+, DeliveryCount: (\d+), SessionId: (.*)"
)
_EXECUTED = re.compile(r"Executed 'Functions\.(\w+)' \((Succeeded|Failed), Id=([\w-]+),")


class InvocationLog(logging.Handler):
    """Reads the host's log as someone watching ``func start`` would."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self._runs: dict[str, Invocation] = {}
        self._order: list[str] = []
        self._lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        with self._lock:
            if started := _EXECUTING.search(text):
                detail = _DETAIL.search(text)
                self._runs[started.group(3)] = Invocation(
                    function=started.group(1),
                    invocation_id=started.group(3),
                    reason=started.group(2),
                    started=record.created,
                    message_id=detail.group(1) if detail else None,
                    session_id=detail.group(3).strip() if detail else None,
                    delivery_count=int(detail.group(2)) if detail else None,
                )
                self._order.append(started.group(3))
            elif ended := _EXECUTED.search(text):
                run = self._runs.get(ended.group(3))
                if run is not None:
                    self._runs[run.invocation_id] = Invocation(
                        **{
                            **run.__dict__,
                            "ended": record.created,
                            "succeeded": ended.group(2) == "Succeeded",
                        }
                    )

    def of(self, function: str) -> list[Invocation]:
        with self._lock:
            return [self._runs[i] for i in self._order if self._runs[i].function == function]


@dataclass(frozen=True)
class E2E:
    stack: LocalStack
    api: AppClient
    invocations: InvocationLog
    payments: TableSimulatedPaymentGateway
    servicebus: ServiceBusClient
    otlp: OtlpReceiver  # where the app exports its traces, metrics and logs

    def exported(self) -> None:
        """What the app recorded so far is at ``otlp`` once this returns."""
        telemetry().flush()

    @property
    def purchase_queue(self) -> str:
        return self.stack.settings["PURCHASE_QUEUE_NAME"]

    @property
    def import_queue(self) -> str:
        return self.stack.settings["IMPORT_QUEUE_NAME"]

    def table(self, name: str) -> TableClient:
        return TableClient.from_connection_string(self.stack.storage_connection_string, name)

    def receipt_mail(self, job_id: str) -> EmailMessage | None:
        return next(iter(self.receipt_mails(job_id)), None)

    def receipt_mails(self, job_id: str) -> list[EmailMessage]:
        """Every receipt mailed for the job (a copy sent twice would be here twice)."""
        wanted = f"<{job_id}.receipt@pipelines.local>"
        return [m for m in self.stack.email.received() if str(m.get("Message-ID")) == wanted]

    def sessions_that_ran(self, candidates: set[str]) -> set[str]:
        """Which of the ``candidates`` sessions ran any purchase task."""
        ran = {r.session_id for r in self.invocations.of("purchase_tasks")}
        return {session for session in candidates if session in ran}

    def charges_for(self, job_id: str) -> list[Any]:
        key = f"{job_id}:payment"
        return [c for c in self.payments.list_charges() if c.idempotency_key == key]

    def archived_session(self, session_id: str, timeout: float = 30) -> dict[str, Any]:
        """GET /api/failed-sessions/{id} once the archive holds the session's last message."""

        def archived() -> dict[str, Any] | None:
            response = self.api.request("GET", f"failed-sessions/{_quote(session_id)}")
            if response.status != 200:
                return None
            document = dict(response.json())
            return document if document["has_last"] else None

        return dict(wait_for(archived, timeout=timeout, what=f"session {session_id} archived"))


def _quote(value: str) -> str:
    import urllib.parse

    return urllib.parse.quote(value, safe="")


@pytest.fixture(scope="package")
def e2e() -> Iterator[E2E]:
    """Stopped after the last test of tests/e2e, so the rest of a full run neither shares the
    machine with it nor sees its app settings in the environment. The app exports its
    telemetry to an OTLP endpoint of the test's, as ``make up`` does to the one its
    OTEL_EXPORTER_OTLP_ENDPOINT names."""
    invocations = InvocationLog()
    host_logger = logging.getLogger("functions_local_host")
    previous_level = host_logger.level
    host_logger.setLevel(logging.INFO)
    host_logger.addHandler(invocations)
    try:
        with run_otlp_receiver() as otlp:
            use_telemetry(None)  # set up again, from the stack's settings
            settings = {**E2E_SETTINGS, "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint}
            try:
                with (
                    run_stack(overrides=settings, host_json=e2e_host_json()) as stack,
                    ServiceBusClient.from_connection_string(
                        stack.servicebus_connection_string
                    ) as servicebus,
                ):
                    yield E2E(
                        stack=stack,
                        api=AppClient(stack.api_url, stack.function_key),
                        invocations=invocations,
                        payments=TableSimulatedPaymentGateway(
                            TableClient.from_connection_string(
                                stack.storage_connection_string, PAYMENTS_TABLE
                            )
                        ),
                        servicebus=servicebus,
                        otlp=otlp,
                    )
            finally:
                telemetry().shutdown()
                use_telemetry(None)
    finally:
        host_logger.removeHandler(invocations)
        host_logger.setLevel(previous_level)


def import_rows(
    e2e: E2E,
    job_id: str,
    rows: Sequence[Mapping[str, Any]],
    *,
    expect_imported: int,
    session_id: str | None = None,
) -> dict[str, Any]:
    """Send ``rows`` as one session of the import queue, the way the Spark job does (message
    id job:row, the last one marked), and wait until GET /api/imports/{job} accounts for all
    of them. Returns that status."""
    session = session_id or f"{job_id}-0000"
    with e2e.servicebus.get_queue_sender(e2e.import_queue) as sender:
        sender.send_messages(
            [
                to_service_bus_message(
                    session,
                    import_message(job_id, step, is_last=step == len(rows), row=dict(row)),
                    message_id=f"{job_id}:{step}",
                )
                for step, row in enumerate(rows, start=1)
            ]
        )

    def finished() -> dict[str, Any] | None:
        status = e2e.api.import_status(job_id)
        if status and status["rows_imported"] + status["rows_failed"] == len(rows):
            return status
        return None

    status = wait_for(finished, timeout=30, what=f"import {job_id} finished")
    assert status["rows_imported"] == expect_imported, status
    return dict(status)


@pytest.fixture(scope="package")
def catalogue(e2e: E2E) -> None:
    """The products the purchase tests order: 1 x E2E-TEA = 10.00, 1 x E2E-MUG = 5.50."""
    import_rows(
        e2e,
        f"catalogue-{uuid.uuid4().hex[:8]}",
        [
            {"sku": "E2E-TEA", "name": "Tea", "price": "10.00", "currency": "EUR"},
            {"sku": "E2E-MUG", "name": "Mug", "price": "5.50", "currency": "EUR"},
        ],
        expect_imported=2,
    )


@pytest.fixture
def outage(e2e: E2E) -> Iterator[str]:
    """A card the payment provider is down for, until the test ends it (or ends)."""
    card = f"tok_amex_{uuid.uuid4().hex[:8]}"
    e2e.payments.set_outage([card])
    yield card
    e2e.payments.reset_outage()


@pytest.fixture
def run_id() -> str:
    return uuid.uuid4().hex[:10]


def order(card: str = "tok_visa_4242", *lines: tuple[str, int]) -> dict[str, Any]:
    return {
        "customer_email": "ada@example.com",
        "customer_name": "Ada Lovelace",
        "card_token": card,
        "currency": "EUR",
        "lines": [{"sku": sku, "quantity": n} for sku, n in (lines or (("E2E-TEA", 2),))],
    }


def charged_total(mail: EmailMessage) -> Decimal:
    body = mail.get_body(preferencelist=("plain",))
    assert body is not None
    match = re.search(r"We charged (\S+) EUR", body.get_content())
    assert match, body.get_content()
    return Decimal(match.group(1))


def wait_for(condition: Callable[[], Any], timeout: float = 30.0, what: str = "") -> Any:
    """``tests.polling.wait_for`` at the whole stack's pace (30 s, polls every 0.2 s)."""
    return polling.wait_for(condition, timeout, what, interval=0.2)
