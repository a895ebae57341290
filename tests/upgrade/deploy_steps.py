"""The steps of tests/upgrade/test_two_releases.py: the stack with both releases' instances
(``Deploy``), orders and replays through either release's API, import rows sent as the Spark
job sends them, and what the test reads back (charges, receipts, logs, dead letters)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from azure.data.tables import TableClient
from azure.servicebus import ServiceBusClient, ServiceBusSubQueue

from localdev.api_client import AppClient
from localdev.host_instances import HostInstance
from localdev.releases import Release
from localdev.stack import LocalStack
from shared.adapters.servicebus_sender import to_service_bus_message
from shared.adapters.table_import_manifests import IMPORT_JOBS_TABLE, TableManifestStore
from shared.adapters.table_keys import table_key
from shared.domain.import_jobs import JobManifest
from shared.domain.pipelines import import_message
from tests.e2e.conftest import wait_for

TAX, SHIPPING = Decimal("0.25"), Decimal("4.95")
CARD = "tok_visa_4242"


@dataclass
class Deploy:
    stack: LocalStack
    previous: Release
    new_api: AppClient  # this checkout's HTTP functions, in the test process
    old_http: HostInstance  # the previous release's HTTP functions
    old: HostInstance  # the previous release's triggers
    new: HostInstance  # this checkout's triggers
    servicebus: ServiceBusClient

    @property
    def old_api(self) -> AppClient:
        return AppClient(f"http://127.0.0.1:{self.old_http.http_port}/api", self.stack.function_key)

    def table(self, name: str) -> TableClient:
        return TableClient.from_connection_string(self.stack.storage_connection_string, name)


def legacy_product(sku: str, price: str) -> dict[str, str]:
    """A product as the catalog wrote it before its partitions: PartitionKey = the SKU."""
    return {"PartitionKey": table_key(sku), "RowKey": "product", "Sku": sku,
            "Name": sku.title(), "Price": price, "Currency": "EUR", "Description": ""}  # fmt: skip


def total(subtotal: Decimal) -> Decimal:
    return subtotal + (subtotal * TAX).quantize(Decimal("0.01")) + SHIPPING


def submit(api: AppClient, line: tuple[str, int], *, key: str | None = None) -> str:
    document = {
        "customer_email": "ada@example.com",
        "customer_name": "Ada",
        "card_token": CARD,
        "currency": "EUR",
        "lines": [{"sku": line[0], "quantity": line[1]}],
    }
    return str(api.submit_order(document, idempotency_key=key or str(uuid.uuid4()))["job_id"])


def status(api: AppClient, job: str) -> dict[str, Any]:
    response = api.request("GET", f"orders/{job}")
    assert response.status == 200, response.body
    return dict(response.json())


def wait_completed(api: AppClient, job: str) -> None:
    wait_for(lambda: status(api, job)["status"] == "completed", timeout=60, what=f"{job} done")


def archived(api: AppClient, job: str) -> None:
    def has_last() -> bool:
        response = api.request("GET", f"failed-sessions/{job}")
        return response.status == 200 and bool(response.json()["has_last"])

    wait_for(has_last, timeout=60, what=f"{job} archived")


def replay(api: AppClient, job: str) -> None:
    api.replay(job, idempotency_key=str(uuid.uuid4()))


def send(deploy: Deploy, job: str, rows: dict[int, dict[str, Any]], last: int) -> None:
    """Rows of the job's one session by step, the way the Spark job sends them; with the
    last step among them, the job's manifest too."""
    session = f"{job}-0000"
    queue = deploy.stack.settings["IMPORT_QUEUE_NAME"]
    with deploy.servicebus.get_queue_sender(queue) as sender:
        sender.send_messages(
            [
                to_service_bus_message(
                    session,
                    import_message(job, step, is_last=step == last, row=row),
                    message_id=f"{job}:{step}",
                )
                for step, row in rows.items()
            ]
        )
    if last in rows:
        TableManifestStore(deploy.table(IMPORT_JOBS_TABLE)).save(
            JobManifest(job, queue, last, 0, last, {session: last})
        )


def send_import(deploy: Deploy, job: str, prices: dict[str, str]) -> None:
    """A catalogue of ``prices`` and a row without a price after them (dead-lettered)."""
    rows: list[dict[str, str | None]] = [
        {"sku": sku, "name": sku.title(), "price": price, "currency": "EUR"}
        for sku, price in prices.items()
    ]
    rows.append({"sku": f"{job}-BAD", "name": "Bad", "price": None, "currency": "EUR"})
    send(deploy, job, dict(enumerate(rows, start=1)), len(rows))


def send_rows(deploy: Deploy, job: str, steps: list[int]) -> None:
    """Some of the 4 rows of an import whose session is handed from one release to the
    other; its 3rd row has no price (dead-lettered)."""
    rows = {
        step: {"sku": f"{job}-{step}", "name": "Pot",
               "price": None if step == 3 else "3.00", "currency": "EUR"}
        for step in steps
    }  # fmt: skip
    send(deploy, job, rows, 4)


def wait_counted(api: AppClient, job: str, rows: int) -> None:
    def counted() -> bool:
        found = api.import_status(job)
        return found is not None and found["rows_imported"] + found["rows_failed"] == rows

    wait_for(counted, timeout=60, what=f"{rows} rows of {job}")


def wait_imported(api: AppClient, job: str) -> None:
    def done() -> bool:
        found = api.import_status(job)
        return found is not None and found["status"] == "completed"

    wait_for(done, timeout=60, what=f"import {job}")


def import_and_wait(deploy: Deploy, api: AppClient, job: str, prices: dict[str, str]) -> None:
    send_import(deploy, job, prices)
    wait_imported(api, job)


def receipts(deploy: Deploy, job: str) -> list[Any]:
    """The receipts mailed for ``job``: the previous release sends over SMTP, this one through
    Communication Services Email, so both mailboxes count."""
    wanted = f"<{job}.receipt@pipelines.local>"
    mailed = [*deploy.stack.mail.received(), *deploy.stack.email.received()]
    return [m for m in mailed if str(m.get("Message-ID")) == wanted]


def ran(instance: HostInstance, job: str, step: int) -> bool:
    """Whether the instance's log shows the import job's row ``step`` run."""
    line = f"session={job}-0000 job={job} task=ImportProduct step={step} outcome="
    return line in instance.log.read_text(errors="replace")


def dead_letters(deploy: Deploy) -> int:
    count = 0
    for setting in ("PURCHASE_QUEUE_NAME", "IMPORT_QUEUE_NAME"):
        with deploy.servicebus.get_queue_receiver(
            deploy.stack.settings[setting], sub_queue=ServiceBusSubQueue.DEAD_LETTER
        ) as receiver:
            count += len(receiver.peek_messages(max_message_count=50))
    return count
