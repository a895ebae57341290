"""The floor under an order's CPU: the SDK calls one order needs, made directly from one process.

``.venv/bin/python -m bench.order_floor --orders N`` (``bench.pipeline_bench`` runs it too, in
the same run as the pipeline, and reports the pipeline's CPU per order against it).

On a stack of its own (Azurite, the project's Service Bus emulator with a session queue of its
own, an SMTP sink in this process: no Functions host, no app), each order makes what
docs/capacity.md's table counts for one order, with the same SDKs and one client each, built
once: Service Bus: one batch of 5 messages sent to a new session, the session accepted, the 5
received one at a time, its state read once and written 6 times, each completed, the receiver
closed; Storage (azure-data-tables, azure-storage-blob): the idempotency record inserted and
updated, 6 progress upserts, the order number's query and 2-operation transaction, a product
point read, the payment's 2 point reads and insert, the session outcome's upsert, the receipt
PDF uploaded and downloaded; the PDF rendered by the app's renderer (ReportLab) and mailed with
smtplib. The orders run one after another. It reports CPU seconds per order of this process,
Azurite and the emulator (``/proc``), as ``bench.pipeline_bench`` measures the pipeline's.
"""

from __future__ import annotations

import argparse
import os
import smtplib
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from email.message import EmailMessage
from pathlib import Path

from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableServiceClient, UpdateMode
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.storage.blob import BlobServiceClient

from bench.proc import cpu_by_process
from localdev.azurite import run_azurite
from localdev.mail_sink import run_mail_sink
from localdev.ports import free_port
from localdev.stack import run_servicebus_emulator
from shared.adapters.pdf_receipts import ReportLabReceiptRenderer
from shared.domain.receipts import Receipt, ReceiptLine

QUEUE = "floor-tasks"
GROUPS = {
    "emulator": lambda command: "servicebus_emulator" in command,
    "Azurite": lambda command: "azurite" in command,
}
CALLER = "caller (SDKs, PDF, SMTP)"
TABLES = ["floorkeys", "floorprogress", "floornumbers", "floorproducts", "floorpayments"]
TABLES += ["flooroutcomes"]


@dataclass(frozen=True)
class Floor:
    orders: int
    seconds: float
    cpu: dict[str, float]  # CPU seconds by group

    def cpu_per_order(self, group: str | None = None) -> float:
        used = sum(self.cpu.values()) if group is None else self.cpu[group]
        return used / self.orders if self.orders else 0.0


class Clients:
    """One client of each SDK, built once, as the app builds them once per worker."""

    def __init__(self, storage: str, servicebus: str, smtp_port: int) -> None:
        tables = TableServiceClient.from_connection_string(storage)
        self.tables = {name: tables.create_table_if_not_exists(name) for name in TABLES}
        blobs = BlobServiceClient.from_connection_string(storage)
        self.receipts = blobs.get_container_client("floorreceipts")
        if not self.receipts.exists():
            self.receipts.create_container()
        self.servicebus = ServiceBusClient.from_connection_string(servicebus)
        self.sender = self.servicebus.get_queue_sender(QUEUE)
        self.renderer = ReportLabReceiptRenderer()
        self.smtp_port = smtp_port
        self.tables["floorproducts"].upsert_entity(
            {"PartitionKey": "FLOOR-TEA", "RowKey": "product", "Name": "Tea", "Price": "3.00"}
        )
        self.tables["floornumbers"].upsert_entity({"PartitionKey": "c", "RowKey": "c", "n": 0})

    def close(self) -> None:
        self.sender.close()
        self.servicebus.close()


def one_order(c: Clients, index: int) -> None:
    """What one order costs outside the app's own code (module docstring)."""
    job = f"floor-{uuid.uuid4().hex}"
    t = c.tables
    # The POST: its idempotency record, the order's first progress record, the 5 messages.
    t["floorkeys"].create_entity({"PartitionKey": job, "RowKey": "k", "state": "started"})
    t["floorkeys"].upsert_entity({"PartitionKey": job, "RowKey": "k", "state": "done"})
    t["floorprogress"].upsert_entity({"PartitionKey": job, "RowKey": "0", "status": "accepted"})
    batch = c.sender.create_message_batch()
    for step in range(1, 6):
        batch.add_message(ServiceBusMessage(f'{{"step": {step}}}', session_id=job))
    c.sender.send_messages(batch)
    # The session: accepted, its state read once, each message received, state written,
    # settled; the last one's clear; the receiver closed.
    with c.servicebus.get_queue_receiver(QUEUE, session_id=job, max_wait_time=5) as receiver:
        session = receiver.session
        session.get_state()
        for step in range(1, 6):
            (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            _task(c, job, step, index)
            session.set_state(f'{{"next_step": {step + 1}}}')
            receiver.complete_message(message)
            t["floorprogress"].upsert_entity(
                {"PartitionKey": job, "RowKey": str(step), "status": "completed"}
            )
        session.set_state(None)


def _task(c: Clients, job: str, step: int, index: int) -> None:
    t = c.tables
    if step == 1:  # the order number: the counter read, then allocation and counter together
        counter = next(iter(t["floornumbers"].query_entities("PartitionKey eq 'c'")))
        t["floornumbers"].submit_transaction(
            [
                ("upsert", {"PartitionKey": "c", "RowKey": job, "n": index}),
                ("update", {**counter, "n": index}, {"mode": UpdateMode.REPLACE}),
            ]
        )
    elif step == 2:
        t["floorproducts"].get_entity("FLOOR-TEA", "product")
    elif step == 3:  # the charge read, the outage switch read, the charge inserted
        for row in (job, "outage"):
            with suppress(ResourceNotFoundError):  # as the provider's first reads find nothing
                t["floorpayments"].get_entity("p", row)
        t["floorpayments"].create_entity({"PartitionKey": "p", "RowKey": job, "amount": "6"})
    elif step == 4:
        pdf = c.renderer.render(_receipt(job))
        c.receipts.upload_blob(f"{job}.pdf", pdf, overwrite=True)
    else:
        pdf = c.receipts.download_blob(f"{job}.pdf").readall()
        mail = EmailMessage()
        mail["From"], mail["To"], mail["Subject"] = "shop@example.com", "ada@example.com", job
        mail["Message-ID"] = f"<{job}.receipt@floor.local>"
        mail.set_content("Your receipt is attached.")
        mail.add_attachment(pdf, maintype="application", subtype="pdf", filename="r.pdf")
        with smtplib.SMTP("127.0.0.1", c.smtp_port) as smtp:
            smtp.send_message(mail)
        t["flooroutcomes"].upsert_entity({"PartitionKey": job, "RowKey": "s", "status": "ok"})


def _receipt(job: str) -> Receipt:
    line = ReceiptLine("FLOOR-TEA", "Tea", 2, Decimal("3.00"), Decimal("6.00"))
    return Receipt(
        order_number=job[-8:],
        customer_name="Ada",
        customer_email="ada@example.com",
        currency="EUR",
        lines=(line,),
        subtotal=Decimal("6.00"),
        tax=Decimal("1.50"),
        shipping=Decimal("4.95"),
        total=Decimal("12.45"),
        charge_id=f"ch_{job[-8:]}",
        issued_at=datetime.now(UTC).isoformat(),
    )


def measure_floor(orders: int, workdir: Path, *, warmup: int = 3) -> Floor:
    """``orders`` orders' SDK calls on a stack of their own, after ``warmup`` unmeasured."""
    with ExitStack() as stack:
        azurite = stack.enter_context(run_azurite(log_path=workdir / "floor-azurite.log"))
        emulator = stack.enter_context(
            run_servicebus_emulator(
                port=free_port(),
                http_port=free_port(),
                data_dir=None,
                log_path=workdir / "floor-servicebus.log",
                session_queues=[QUEUE],
            )
        )
        sink = stack.enter_context(run_mail_sink())
        clients = Clients(azurite.connection_string, str(emulator.connection_string), sink.port)
        stack.callback(clients.close)
        for index in range(warmup):
            one_order(clients, index)
        before = cpu_by_process(os.getpid(), GROUPS, CALLER)
        started = time.monotonic()
        for index in range(warmup, warmup + orders):
            one_order(clients, index)
        seconds = time.monotonic() - started
        after = cpu_by_process(os.getpid(), GROUPS, CALLER)
    used = dict.fromkeys([CALLER, *GROUPS], 0.0)
    for pid, (group, cpu) in after.items():
        used[group] += cpu - before.get(pid, (group, 0.0))[1]
    return Floor(orders, seconds, used)


def floor_table(floor: Floor) -> str:
    groups = [CALLER, *GROUPS]
    head = " | ".join(groups)
    cells = " | ".join(f"{floor.cpu_per_order(g) * 1e3:.1f}" for g in groups)
    return (
        f"| floor: CPU ms per order, {head} | total | orders/s (one after another) |\n"
        f"|---|{'---|' * len(groups)}---|\n"
        f"| {floor.orders} orders | {cells} | {floor.cpu_per_order() * 1e3:.1f} "
        f"| {floor.orders / floor.seconds:.1f} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.order_floor", description=__doc__)
    parser.add_argument("--orders", type=int, default=50)
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    floor = measure_floor(args.orders, Path(tempfile.mkdtemp(prefix="order-floor-")))
    load_after = os.getloadavg()
    print(
        f"{os.cpu_count()} cores; load average {load_before[0]:.1f} before, "
        f"{load_after[0]:.1f} after (1 min)\n"
    )
    print(floor_table(floor))
    return 0


if __name__ == "__main__":
    sys.exit(main())
