"""An outage in the middle of real work, on the running local stack: an import of 2,000 rows
in 8 sessions and 40 orders are under way when a dependency goes away for a while; then it
comes back. What every outage test checks afterwards: every order completed once (one charge,
one receipt), every row imported once, nothing dead-lettered, no session failed, the job's
counts exact, and the pipelines shown paused during the outage and running after it.

Each test module runs one stack of its own (Azurite and the emulator keeping their data in a
folder, so either can be stopped and started again on its ports; the app's worker in a process
of its own, as shipped), with a retry window of a few minutes so that the outages it survives
are those a test can wait for."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from azure.data.tables import TableClient, TableServiceClient
from azure.servicebus import ServiceBusClient, ServiceBusSubQueue

from localdev.api_client import AppClient
from localdev.azurite import Azurite
from localdev.stack import LocalStack, run_stack
from shared.adapters.azure_clients import PAYMENTS_TABLE
from shared.adapters.servicebus_sender import to_service_bus_message
from shared.adapters.simulated_payments import TableSimulatedPaymentGateway
from shared.adapters.table_import_manifests import IMPORT_JOBS_TABLE, TableManifestStore
from shared.domain.import_jobs import JobManifest
from shared.domain.pipelines import PRODUCT_IMPORT, PURCHASE, import_message
from tests.polling import wait_for

ROWS, SESSIONS, ORDERS = 2000, 8, 40
PRODUCT = "CHAOS-TEA"

CHAOS_SETTINGS = {
    "DLQ_ARCHIVE_SCHEDULE": "*/2 * * * * *",
    "PAYMENT_SIMULATOR_DECLINE_TOKENS": "tok_declined",
    "PAYMENT_SIMULATOR_OUTAGE_TOKENS": "",
    "FUNCTIONS_HOST_KEY": "chaos-host-key",
    "FUNCTIONS_MASTER_KEY": "chaos-master-key",
}


@dataclass
class Chaos:
    stack: LocalStack
    api: AppClient
    servicebus: ServiceBusClient
    paused_seen: dict[str, set[str]] = field(default_factory=dict)  # pipeline -> summaries

    @property
    def tables(self) -> TableServiceClient:
        return TableServiceClient.from_connection_string(self.stack.storage_connection_string)

    def table(self, name: str) -> TableClient:
        return TableClient.from_connection_string(self.stack.storage_connection_string, name)

    def queue(self, pipeline: str) -> str:
        return self.stack.settings[
            {PURCHASE: "PURCHASE_QUEUE_NAME"}.get(pipeline, "IMPORT_QUEUE_NAME")
        ]

    # -- the work ---------------------------------------------------------------------------

    def send_import(self, job: str, *, rows: int = ROWS, sessions: int = SESSIONS) -> None:
        """``rows`` valid rows in ``sessions`` sessions, as the Spark job sends them (message
        ids job:row, the last of each session marked), and its manifest."""
        per_session = rows // sessions
        counts = {}
        with self.servicebus.get_queue_sender(self.queue(PRODUCT_IMPORT)) as sender:
            for n in range(sessions):
                session = f"{job}-{n:04d}"
                counts[session] = per_session
                messages = [
                    to_service_bus_message(
                        session,
                        import_message(
                            job,
                            step,
                            is_last=step == per_session,
                            row=product_row(f"{job}-{n}-{step}"),
                        ),
                        message_id=f"{job}:{n * per_session + step}",
                    )
                    for step in range(1, per_session + 1)
                ]
                for start in range(0, per_session, 100):
                    sender.send_messages(messages[start : start + 100])
        TableManifestStore(self.table(IMPORT_JOBS_TABLE)).save(
            JobManifest(job, self.queue(PRODUCT_IMPORT), rows, 0, rows, counts)
        )

    def submit_orders(self, count: int = ORDERS) -> list[str]:
        """``count`` orders through the API, each with an Idempotency-Key, four at a time."""
        jobs: list[str] = []
        lock = threading.Lock()

        def submit() -> None:
            document = self.api.submit_order(
                order_of(PRODUCT), idempotency_key=f"chaos-{uuid.uuid4()}"
            )
            with lock:
                jobs.append(str(document["job_id"]))

        for start in range(0, count, 4):
            threads = [threading.Thread(target=submit) for _ in range(min(4, count - start))]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        assert len(jobs) == count
        return jobs

    def order_status(self, job: str) -> str:
        response = self.api.request("GET", f"orders/{job}")
        return str(response.json()["status"]) if response.status == 200 else "unknown"

    def imported(self, job: str) -> dict[str, Any] | None:
        response = self.api.request("GET", f"imports/{job}")
        return dict(response.json()) if response.status == 200 else None

    # -- what is seen -----------------------------------------------------------------------

    def watch_pauses(self) -> None:
        """What the overview says is paused now (each summary seen is kept)."""
        response = self.api.request("GET", "overview")
        if response.status != 200:
            return
        for pipeline in response.json()["pipelines"]:
            if pipeline["paused"]:
                summary = pipeline["paused"]["summary"]
                self.paused_seen.setdefault(pipeline["pipeline"], set()).add(summary)

    def paused_now(self) -> dict[str, Any]:
        response = self.api.request("GET", "overview")
        assert response.status == 200, response.body
        return {p["pipeline"]: p["paused"] for p in response.json()["pipelines"] if p["paused"]}

    def charges(self, job: str) -> int:
        payments = TableSimulatedPaymentGateway(self.table(PAYMENTS_TABLE))
        return sum(1 for c in payments.list_charges() if c.idempotency_key == f"{job}:payment")

    def receipts(self, job: str) -> int:
        wanted = f"<{job}.receipt@pipelines.local>"
        return sum(1 for m in self.stack.email.received() if str(m.get("Message-ID")) == wanted)

    def dead_letters(self) -> int:
        total = 0
        for pipeline in (PURCHASE, PRODUCT_IMPORT):
            with self.servicebus.get_queue_receiver(
                self.queue(pipeline), sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=1
            ) as receiver:
                total += len(receiver.peek_messages(max_message_count=100))
        return total

    def failed_sessions(self) -> list[dict[str, Any]]:
        response = self.api.request("GET", "failed-sessions", params={"status": "any"})
        assert response.status == 200, response.body
        return list(response.json()["items"])


def product_row(sku: str, price: str = "4.20") -> dict[str, Any]:
    return {"sku": sku, "name": "Tea", "price": price, "currency": "EUR"}


def order_of(sku: str) -> dict[str, Any]:
    return {
        "customer_email": "ada@example.com",
        "customer_name": "Ada",
        "card_token": "tok_visa_4242",
        "currency": "EUR",
        "lines": [{"sku": sku, "quantity": 2}],
    }


@contextmanager
def chaos_stack(
    data_dir: Path,
    settings: dict[str, str],
    *,
    storage_via: Callable[[Azurite], AbstractContextManager[Any]] | None = None,
) -> Iterator[Chaos]:
    """The stack of one outage test, its catalogue imported."""
    with (
        run_stack(
            overrides={**CHAOS_SETTINGS, **settings},
            data_dir=data_dir,
            storage_via=storage_via,
        ) as stack,
        ServiceBusClient.from_connection_string(stack.servicebus_connection_string) as bus,
    ):
        chaos = Chaos(stack, AppClient(stack.api_url, stack.function_key), bus)
        job = f"catalogue-{uuid.uuid4().hex[:8]}"
        with bus.get_queue_sender(chaos.queue(PRODUCT_IMPORT)) as sender:
            sender.send_messages(
                to_service_bus_message(
                    job,
                    import_message(job, 1, is_last=True, row=product_row(PRODUCT)),
                    message_id=f"{job}:1",
                )
            )
        wait_for(
            lambda: (status := chaos.imported(job)) and status["rows_imported"] == 1,
            timeout=60,
            what="the catalogue imported",
        )
        yield chaos


@dataclass
class Run:
    """The work an outage fell on: its import job and orders, and how far they had come when
    it began (orders completed, rows imported)."""

    import_job: str
    orders: list[str]
    outage_seconds: float
    orders_done_before: int
    rows_done_before: int


def outage_in_the_middle(
    chaos: Chaos,
    *,
    begin: Callable[[], None],
    end: Callable[[], None],
    seconds: float,
) -> Run:
    """Submit the orders and send the import, then, while they run, ``begin`` the outage,
    watch the overview through it, ``end`` it after ``seconds``."""
    job = f"import-{uuid.uuid4().hex[:8]}"
    orders = chaos.submit_orders()
    chaos.send_import(job)
    orders_done = sum(chaos.receipts(order) for order in orders)  # the mail sink: at once
    rows_done = (chaos.imported(job) or {}).get("rows_imported", 0)
    begin()
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        with suppress(OSError):  # the API's own answer may time out in an outage
            chaos.watch_pauses()
        time.sleep(1.0)
    end()
    return Run(job, orders, seconds, orders_done, rows_done)


def assert_nothing_lost_nothing_twice(chaos: Chaos, run: Run, *, dependency: str) -> None:
    """Every order completed once, every row imported once, nothing dead-lettered or failed,
    the counts exact; the pipelines were shown paused on ``dependency`` and run again."""
    # the outage fell on work under way, not before or after it
    assert run.orders_done_before < len(run.orders) and run.rows_done_before < ROWS, run
    for job in run.orders:
        wait_for(_completed(chaos, job), timeout=300, what=f"order {job} completed")
    status = wait_for(
        lambda: (s := chaos.imported(run.import_job)) and s["status"] == "completed" and s,
        timeout=300,
        what="the import completed",
    )
    assert (status["rows_imported"], status["rows_failed"], status["rows_pending"]) == (
        ROWS,
        0,
        0,
    ), status
    for job in run.orders:
        assert chaos.charges(job) == 1, f"{job}: charged {chaos.charges(job)} times"
        assert chaos.receipts(job) == 1, f"{job}: {chaos.receipts(job)} receipts"
    assert chaos.dead_letters() == 0
    assert chaos.failed_sessions() == []
    seen = {summary for summaries in chaos.paused_seen.values() for summary in summaries}
    assert any(summary.startswith(f"{dependency} unreachable since") for summary in seen), seen
    wait_for(lambda: chaos.paused_now() == {}, timeout=60, what="every pipeline running again")


def _completed(chaos: Chaos, job: str) -> Callable[[], bool]:
    return lambda: chaos.order_status(job) == "completed"
