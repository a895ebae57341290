"""Retention: the storage each order leaves behind, and what the purge costs per row.

On one Azurite: ``--orders`` orders' records are written as a completed order leaves them, by
the app's own adapters (its Idempotency-Key record with its answer, its progress: the
acceptance and five steps, its session's outcome, its charge, its order number, its receipt as
the real renderer makes it), ``--failed`` of them per hundred also as a failed session (the
dead letters of a purchase that failed at ProcessPayment, its summary and an operator's
resolution in the audit trail). Then:

- the storage they hold, by table and container: each entity's billed size by the formula
  Microsoft published (4 bytes + 2 per character of PartitionKey and RowKey + for each
  property 8 bytes, 2 per character of its name and its value's size:
  http://blogs.msdn.com/b/avkashchauhan/archive/2011/11/30/how-the-size-of-an-entity-is-caclulated-in-windows-azure-table-storage.aspx),
  each blob's length: per order, and per million orders;
- one purge run once every lifetime has passed (``shared.service_layer.retention``): rows and
  blobs deleted, seconds, rows per second, the bench process's CPU (the purge's own) and the
  Storage requests per row.

Run: ``.venv/bin/python -m bench.purge_bench`` (``--orders 1000 --failed 2``); about a minute,
most of it writing the orders.
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from azure.data.tables import TableServiceClient
from azure.storage.blob import BlobServiceClient

from bench.proc import load_average, machine_line
from localdev.azurite import run_azurite
from shared.adapters.azure_clients import APP_CONTAINERS, ensure_storage
from shared.adapters.blob_receipts import BlobReceiptStore
from shared.adapters.pdf_receipts import ReportLabReceiptRenderer
from shared.adapters.simulated_payments import TableSimulatedPaymentGateway
from shared.adapters.table_archive import TableDeadLetterArchive
from shared.adapters.table_audit import TableAuditTrail
from shared.adapters.table_idempotency import TableIdempotencyRecords
from shared.adapters.table_order_numbers import TableOrderNumbers
from shared.adapters.table_order_progress import TableOrderProgress
from shared.adapters.table_retention import TableRetention
from shared.adapters.table_session_outcomes import TableSessionOutcomes
from shared.bootstrap.declared import APP_TABLES
from shared.domain.archive import FailureRecord
from shared.domain.envelope import TaskMessage
from shared.domain.idempotency import IdempotencyRecord
from shared.domain.payments import payment_idempotency_key
from shared.domain.pipelines import PURCHASE, PURCHASE_TASKS
from shared.domain.receipts import Receipt, ReceiptLine
from shared.domain.retention import Lifetimes
from shared.domain.session_outcomes import SessionOutcome
from shared.service_layer.dead_letters import archive_dead_letters
from shared.service_layer.ports import DeadLetter
from shared.service_layer.resolve import resolve_session
from shared.service_layer.retention import purge_expired

ORDER = {
    "customer_email": "ada@example.com",
    "customer_name": "Ada Lovelace",
    "card_token": "tok_visa_4242",
    "currency": "EUR",
    "lines": [{"sku": "TEA-ASSAM", "quantity": 2}],
}


class _Letters:
    """A dead-letter source over letters in memory (the archive's input)."""

    def __init__(self, letters: list[DeadLetter]) -> None:
        self._letters = letters

    def open(self, queue: str) -> Any:
        letters = self._letters

        class Reader:
            def __enter__(self) -> Reader:
                return self

            def __exit__(self, *exc: object) -> None:
                return None

            def receive(self, max_messages: int) -> list[DeadLetter]:
                taken, letters[:] = letters[:max_messages], letters[max_messages:]
                return taken

            def complete(self, done: Any) -> None:
                return None

        return Reader()


def write_orders(
    tables: TableServiceClient, blobs: BlobServiceClient, orders: int, failed_per_100: int, at: str
) -> None:
    keys = TableIdempotencyRecords(tables.get_table_client("idempotencykeys"))
    progress = TableOrderProgress(tables.get_table_client("orderprogress"))
    outcomes = TableSessionOutcomes(tables.get_table_client("sessionoutcomes"))
    payments = TableSimulatedPaymentGateway(tables.get_table_client("simulatedpayments"))
    numbers = TableOrderNumbers(tables.get_table_client("ordernumbers"))
    receipts = BlobReceiptStore(blobs.get_container_client("receipts"))
    archive = TableDeadLetterArchive(
        tables.get_table_client("deadletters"),
        tables.get_table_client("failedsessions"),
        blobs.get_container_client("deadletter-bodies"),
    )
    audit = TableAuditTrail(tables.get_table_client("operatoraudit"))
    renderer = ReportLabReceiptRenderer()
    letters: list[DeadLetter] = []
    for n in range(orders):
        job = str(uuid.uuid4())
        key = str(uuid.uuid4())
        record = IdempotencyRecord("0" * 64, at)
        keys.start("orders", key, record)
        result = {"job_id": job, "session_id": job, "queue_name": "purchase-tasks"}
        keys.finish(
            "orders",
            key,
            IdempotencyRecord(record.fingerprint, at, {**result, "tasks": list(PURCHASE_TASKS)}),
        )
        progress.accept(job, job, at)
        outcomes.record(SessionOutcome(job, job, PURCHASE, "completed", at))
        charge = payments.charge(
            idempotency_key=payment_idempotency_key(job),
            card_token="tok_visa_4242",
            amount=Decimal("29.95"),
            currency="EUR",
        )
        number = numbers.allocate(job)
        line = ReceiptLine("TEA-ASSAM", "Assam tea", 2, Decimal("10.00"), Decimal("20.00"))
        receipts.save(
            number,
            renderer.render(
                Receipt(
                    number,
                    "Ada Lovelace",
                    "ada@example.com",
                    "EUR",
                    (line,),
                    Decimal("20.00"),
                    Decimal("5.00"),
                    Decimal("4.95"),
                    Decimal("29.95"),
                    charge.charge_id,
                    at,
                )
            ),
        )
        if n % 100 < failed_per_100:
            session = f"failed-{job}"
            archive.record(
                session,
                FailureRecord("ProcessPayment", 3, "PaymentDeclined", "card declined", at, {}),
            )
            for step in range(3, len(PURCHASE_TASKS) + 1):
                message = TaskMessage(
                    job, PURCHASE, PURCHASE_TASKS[step - 1], step, step == 5, ORDER
                )
                letters.append(
                    DeadLetter(
                        queue="purchase-tasks",
                        session_id=session,
                        sequence_number=len(letters) + 1,
                        message_id=message.message_id(),
                        body=message.to_json(),
                        content_type="application/json",
                        application_properties=message.application_properties(),
                        reason="PaymentDeclined" if step == 3 else "SessionFailed",
                        description="The card was declined: ask for another card.",
                        enqueued_time=datetime.fromisoformat(at),
                        delivery_count=1,
                    )
                )
    archive_dead_letters(_Letters(list(letters)), archive, queues=["purchase-tasks"])
    for failed in sorted({str(letter.session_id) for letter in letters}):
        resolve_session(
            archive, audit, failed, f"r-{failed}", who="ada@example.com", note="another card"
        )


def billed_size(entity: Any) -> int:
    """The published estimate of an entity's stored size (see the module)."""
    size = 4 + 2 * (len(str(entity["PartitionKey"])) + len(str(entity["RowKey"])))
    for name, value in entity.items():
        if name in ("PartitionKey", "RowKey"):
            continue
        size += 8 + 2 * len(name)
        if isinstance(value, bool):
            size += 1
        elif isinstance(value, int):
            size += 4 if -(2**31) <= value < 2**31 else 8
        elif isinstance(value, float | datetime):
            size += 8
        elif isinstance(value, bytes):
            size += 4 + len(value)
        else:
            size += 4 + 2 * len(str(value))
    return size


def stored(tables: TableServiceClient, blobs: BlobServiceClient) -> Counter[str]:
    found: Counter[str] = Counter()
    for table in APP_TABLES:
        for entity in tables.get_table_client(table).list_entities():
            found[table] += billed_size(entity)
    for container in APP_CONTAINERS:
        for blob in blobs.get_container_client(container).list_blobs():
            found[container] += int(blob.size) + 2 * len(blob.name)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=1000)
    parser.add_argument("--failed", type=int, default=2, help="failed sessions per 100 orders")
    args = parser.parse_args()
    load_before = load_average()
    requests: list[str] = []
    with run_azurite() as azurite:
        connection = azurite.connection_string

        def count(response: Any) -> None:
            requests.append(response.http_request.method)

        tables = TableServiceClient.from_connection_string(connection, raw_request_hook=count)
        blobs = BlobServiceClient.from_connection_string(connection, raw_request_hook=count)
        ensure_storage(tables, blobs, tables=APP_TABLES)
        now = datetime.now(UTC)
        started = time.perf_counter()
        write_orders(tables, blobs, args.orders, args.failed, now.isoformat())
        writing = time.perf_counter() - started
        held = stored(tables, blobs)
        rows_before = {
            t: sum(1 for _ in tables.get_table_client(t).list_entities(select=["RowKey"]))
            for t in APP_TABLES
        }

        retention = TableRetention(
            {t: tables.get_table_client(t) for t in APP_TABLES},
            {c: blobs.get_container_client(c) for c in APP_CONTAINERS},
        )
        archive = TableDeadLetterArchive(
            tables.get_table_client("deadletters"),
            tables.get_table_client("failedsessions"),
            blobs.get_container_client("deadletter-bodies"),
        )
        requests.clear()
        cpu, wall = time.process_time(), time.perf_counter()
        report = purge_expired(
            retention, archive, Lifetimes(), now=now + timedelta(days=400), max_seconds=3600
        )
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        left = stored(tables, blobs)
    load_after = load_average()

    print(machine_line(load_before, load_after) + "\n")
    print(
        f"{args.orders:,} orders written in {writing:.0f} s, "
        f"{args.failed} failed sessions per 100 (resolved)\n"
    )
    print("| table or container | bytes per order | GB per million orders |")
    print("|---|---|---|")
    for name, size in sorted(held.items(), key=lambda i: -i[1]):
        print(f"| {name} | {size / args.orders:,.0f} | {size / args.orders * 1e6 / 1e9:,.2f} |")
    per_order = sum(held.values()) / args.orders
    print(f"| **all** | **{per_order:,.0f}** | **{per_order * 1e6 / 1e9:,.2f}** |\n")
    print(f"Left once every lifetime has passed: {sum(left.values()):,} bytes {dict(left)}\n")
    deleted = report.total
    print(
        "| rows and blobs deleted | seconds | per second | CPU per row (the purge's process) "
        "| Storage requests per row |"
    )
    print("|---|---|---|---|---|")
    print(
        f"| {deleted:,} ({sum(rows_before.values()):,} rows before) | {wall:.1f} "
        f"| {deleted / wall:,.0f} | {cpu / deleted * 1000:.2f} ms "
        f"| {len(requests) / deleted:.2f} |"
    )


if __name__ == "__main__":
    main()
