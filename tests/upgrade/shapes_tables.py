"""The table entities and blobs the app stores, each written by its real writer from fixed
samples on Azurite and read back as stored."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal

from azure.data.tables import TableClient

from shared.adapters.blob_receipts import BlobReceiptStore
from shared.adapters.simulated_payments import TableSimulatedPaymentGateway
from shared.adapters.table_archive import INLINE_BODY_MAX, TableDeadLetterArchive
from shared.adapters.table_audit import TableAuditTrail
from shared.adapters.table_confirmations import TableConfirmations
from shared.adapters.table_idempotency import TableIdempotencyRecords
from shared.adapters.table_import_manifests import TableManifestStore
from shared.adapters.table_import_progress import TableImportProgress
from shared.adapters.table_order_numbers import TableBlockOrderNumbers, TableOrderNumbers
from shared.adapters.table_order_progress import TableOrderProgress
from shared.adapters.table_pipeline_pauses import TablePipelinePauses
from shared.adapters.table_products import TableProductCatalog
from shared.adapters.table_receipt_emails import TableReceiptEmails
from shared.adapters.table_replay_requests import TableReplayRequests
from shared.adapters.table_session_outcomes import TableSessionOutcomes
from shared.adapters.table_timer_runs import TableTimerRuns
from shared.domain.archive import FailureRecord, ReplayClaim, replay_session_id
from shared.domain.audit import AuditEntry, Change, MessageEdit
from shared.domain.confirmations import Selection
from shared.domain.envelope import TaskMessage
from shared.domain.idempotency import IdempotencyRecord
from shared.domain.import_jobs import JobManifest
from shared.domain.order_status import StepOutcome
from shared.domain.orders import parse_order
from shared.domain.pauses import ManualPause
from shared.domain.payments import payment_idempotency_key
from shared.domain.pipelines import PURCHASE
from shared.domain.products import Product
from shared.domain.receipt_emails import ReceiptEmail
from shared.domain.replays import ReplayRequest
from shared.domain.session_outcomes import SessionOutcome
from shared.service_layer.dead_letters import archive_dead_letters
from shared.service_layer.ports import DeadLetter, RowOutcome
from tests.builders import PIPELINES, dead_letter, order_document
from tests.fakes import (
    InMemoryDeadLetterQueue,
)

from .shape_structures import Storage, entities

JOB = "job-1"
AT = "2026-11-27T12:00:00+00:00"
KEY = "key-1"
ORDER = parse_order(order_document(lines=[{"sku": "TEA-1", "quantity": 2}]))


# -- table entities ---------------------------------------------------------------------------


def products(storage: Storage) -> object:
    table = storage.table()
    catalog = TableProductCatalog(table)
    catalog.upsert_many([Product("TEA-1", "Tea", Decimal("4.20"), "EUR", "Assam")])
    table.create_entity(  # a product of the layout before, moved
        {"PartitionKey": "MUG-1", "RowKey": "product", "Sku": "MUG-1", "Name": "Mug",
         "Price": "8.50", "Currency": "EUR", "Description": ""}
    )  # fmt: skip
    catalog.move_legacy_products()
    return entities(table)


def order_numbers(storage: Storage) -> object:
    gapless, blocks = storage.table(), storage.table()
    TableOrderNumbers(gapless).allocate(JOB)
    TableBlockOrderNumbers(blocks, block_size=10).allocate("job-2")
    return {"gapless": entities(gapless), "blocks": entities(blocks)}


def payments(storage: Storage) -> object:
    table = storage.table()
    gateway = TableSimulatedPaymentGateway(table)
    charge = gateway.charge(
        idempotency_key=payment_idempotency_key(JOB),
        card_token="tok_visa",
        amount=Decimal("10.20"),
        currency="EUR",
    )
    gateway.set_outage(["tok_amex"])
    return entities(table, keys={charge.charge_id: "<charge id>"})


Archive = tuple[TableDeadLetterArchive, TableClient, TableClient]


def failed_purchase_archive(storage: Storage) -> Archive:
    """A purchase declined at its payment step, archived: (archive, rows, sessions)."""
    rows, sessions, bodies = storage.table(), storage.table(), storage.container()
    archive = TableDeadLetterArchive(rows, sessions, bodies)
    source = InMemoryDeadLetterQueue()
    *inline, last = _dead_letters()
    source.add(*inline, replace(last, body=b"x" * (INLINE_BODY_MAX + 1)))  # to Blob Storage
    context = {"order_number": "ORD-00000001", "total": "10.20"}
    archive.record(
        JOB, FailureRecord("ProcessPayment", 3, "PaymentDeclined", "declined", AT, context)
    )
    archive_dead_letters(source, archive, queues=["purchase-tasks"], clock=sample_time)
    return archive, rows, sessions


def dead_letters(storage: Storage) -> object:
    archive, rows, _ = failed_purchase_archive(storage)
    replayed = archive.list_session(JOB)[:1]
    archive.mark_replayed([r.replayed(session_id="replay-1", key=KEY, at=AT) for r in replayed])
    return entities(rows)


def dead_letter_bodies(storage: Storage) -> object:
    rows, sessions, bodies = storage.table(), storage.table(), storage.container()
    archive = TableDeadLetterArchive(rows, sessions, bodies)
    source = InMemoryDeadLetterQueue()
    source.add(*_dead_letters(body=b"x" * (INLINE_BODY_MAX + 1)))
    archive_dead_letters(source, archive, queues=["purchase-tasks"], clock=sample_time)
    return sorted(blob.name for blob in bodies.list_blobs())


def failed_sessions(storage: Storage) -> object:
    archive, _, sessions = failed_purchase_archive(storage)
    archive.claim_replay(JOB, ReplayClaim(KEY, replay_session_id(JOB, KEY), AT))
    return entities(sessions)


def replay_requests(storage: Storage) -> object:
    table = storage.table()
    TableReplayRequests(table).save(
        ReplayRequest(
            "8d9f2c61-0f1b-4c4e-9f55-2b9f4b1c7a10", "purchase-tasks", "ProcessPayment",
            "PaymentProviderUnavailable", "completed", found=2, sent=1, failed=1,
            errors=({"session_id": "s-2", "error": "gone"},), created_at=AT, updated_at=AT,
            taken=1, taken_sessions=({"session_id": "s-3", "claim": "k"},), who="ops", note="n",
        )
    )  # fmt: skip
    return entities(table)


def import_progress(storage: Storage) -> object:
    table = storage.table()
    progress = TableImportProgress(table)
    progress.record(JOB, f"{JOB}-0000", 3, status="failed", reason="InvalidProduct:price")
    progress.record_many([RowOutcome(JOB, f"{JOB}-0001", 1, "imported")])
    progress.record_run(JOB, f"{JOB}-0000", 1, 2)
    return entities(table)


def import_jobs(storage: Storage) -> object:
    table = storage.table()
    TableManifestStore(table).save(
        JobManifest(
            JOB,
            "product-import-tasks",
            3,
            1,
            2,
            {f"{JOB}-0000": 2},
            "a.csv",
            trace_id="0af7651916cd43dd8448eb211c80319c",
        )
    )
    return entities(table)


def idempotency_keys(storage: Storage) -> object:
    table = storage.table()
    records = TableIdempotencyRecords(table)
    records.start("orders", KEY, IdempotencyRecord("f" * 64, AT))
    records.start("replay:s-1", "key-2", IdempotencyRecord("f" * 64, AT))
    records.finish("replay:s-1", "key-2", IdempotencyRecord("f" * 64, AT, {"job_id": JOB}))
    return entities(table)


def order_progress(storage: Storage) -> object:
    table = storage.table()
    progress = TableOrderProgress(table)
    progress.accept(JOB, JOB, AT)
    progress.record(JOB, StepOutcome(3, "ProcessPayment", "failed", "PaymentDeclined", JOB, AT))
    return entities(table)


def operator_audit(storage: Storage) -> object:
    table = storage.table()
    edit = MessageEdit("00000000000000001000", 3, "ProcessPayment",
                       (Change("replace", "/payload/card_token", "a", "b"),))  # fmt: skip
    TableAuditTrail(table).record(
        AuditEntry(JOB, "edit-and-replay", "ops", AT, "fixed", "replay-1", (edit,), KEY)
    )
    return entities(table)


def confirmations(storage: Storage) -> object:
    table = storage.table()
    issued = TableConfirmations(table).issue(
        "replay", Selection("purchase-tasks", "ProcessPayment", "PaymentDeclined"), 2, "d", AT
    )
    TableConfirmations(table).redeem(issued.token)
    return entities(table, keys={issued.token: "<token>"})


def session_outcomes(storage: Storage) -> object:
    table = storage.table()
    outcomes = TableSessionOutcomes(table)
    outcomes.accept(SessionOutcome(JOB, JOB, PURCHASE, "accepted", AT))
    outcomes.record(SessionOutcome(JOB, "replay-1", PURCHASE, "failed", AT, "PaymentDeclined"))
    return entities(table)


def pipeline_pauses(storage: Storage) -> object:
    table = storage.table()
    TablePipelinePauses(table).pause(PURCHASE, ManualPause("ops", "maintenance", AT))
    return entities(table)


def receipt_emails(storage: Storage) -> object:
    table = storage.table()
    emails = TableReceiptEmails(table)
    first = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
    emails.create(ReceiptEmail(JOB, "ada@example.com", "sending", f"{JOB}:5", first, "acs"))
    emails.save(
        ReceiptEmail(JOB, "ada@example.com", "sent", f"{JOB}:5", first, "acs", 1, 2, "op-1", "d")
    )
    return entities(table)


def timer_runs(storage: Storage) -> object:
    table = storage.table()
    runs = TableTimerRuns(table)
    runs.started("archive_dead_letters", AT)
    runs.succeeded("archive_dead_letters", AT, started_at=AT, drained=True)
    runs.failed("purge", AT, "Table Storage could not be reached")
    return entities(table)


def receipts(storage: Storage) -> object:
    container = storage.container()
    number = TableOrderNumbers(storage.table()).allocate(JOB)
    BlobReceiptStore(container).save(number, b"%PDF-1.4")
    return [(blob.name, blob.content_settings.content_type) for blob in container.list_blobs()]


def sample_time() -> datetime:
    return datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def _dead_letters(body: bytes | None = None) -> list[DeadLetter]:
    """The purchase's steps 3 to 5, dead-lettered as a declined card leaves them."""
    return [
        dead_letter(
            message,
            "PaymentDeclined" if message.step == 3 else "SessionFailed",
            queue="purchase-tasks",
            session_id=JOB,
            sequence_number=1000 + message.step,
            body=body,
        )
        for message in order_messages()[2:]
    ]


def order_messages(card: str = "tok_visa") -> list[TaskMessage]:
    order = parse_order(order_document(card_token=card, lines=[{"sku": "TEA-1", "quantity": 2}]))
    return PIPELINES.get(PURCHASE).messages(JOB, order.to_payload())
