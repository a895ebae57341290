"""The purge on a real Azurite: every table and container the app writes is filled with records
just past their lifetime and just within it, written by the app's own adapters, plus records
that are old but still needed (a failed session nobody acted on and everything of its order, an
order still running, a bulk request still running, an import still importing); one run of the
purge deletes exactly the expired records, in batches, and a replay of the kept failed session
still sends its messages."""

from __future__ import annotations

import hashlib
import itertools
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Literal

import pytest
from azure.data.tables import TableClient, TableServiceClient
from azure.storage.blob import BlobServiceClient, ContainerClient

from shared.adapters.azure_clients import APP_CONTAINERS, DEAD_LETTER_BODIES_CONTAINER
from shared.adapters.blob_receipts import BlobReceiptStore
from shared.adapters.simulated_payments import TableSimulatedPaymentGateway
from shared.adapters.table_archive import TableDeadLetterArchive
from shared.adapters.table_audit import TableAuditTrail
from shared.adapters.table_confirmations import TableConfirmations
from shared.adapters.table_idempotency import TableIdempotencyRecords
from shared.adapters.table_import_manifests import TableManifestStore
from shared.adapters.table_import_progress import TableImportProgress
from shared.adapters.table_keys import table_key
from shared.adapters.table_order_numbers import TableOrderNumbers
from shared.adapters.table_order_progress import TableOrderProgress
from shared.adapters.table_replay_requests import TableReplayRequests
from shared.adapters.table_retention import TableRetention
from shared.adapters.table_session_outcomes import TableSessionOutcomes
from shared.bootstrap.declared import APP_TABLES
from shared.domain.archive import FailureRecord
from shared.domain.audit import AuditEntry
from shared.domain.confirmations import Selection
from shared.domain.idempotency import IdempotencyRecord
from shared.domain.import_jobs import JobManifest
from shared.domain.order_status import StepOutcome
from shared.domain.payments import payment_idempotency_key
from shared.domain.pipelines import PURCHASE_TASKS
from shared.domain.replays import ReplayRequest
from shared.domain.retention import Lifetimes
from shared.domain.session_outcomes import SessionOutcome
from shared.service_layer.dead_letters import archive_dead_letters
from shared.service_layer.ports import DeadLetter
from shared.service_layer.replay import replay_session
from shared.service_layer.resolve import resolve_session
from shared.service_layer.retention import purge_expired
from tests.builders import PIPELINES, dead_letter, purchase_message
from tests.fakes import (
    InMemoryAuditTrail,
    InMemoryDeadLetterQueue,
    InMemoryResender,
    InMemorySessionSeeder,
)

pytestmark = pytest.mark.integration

LIFETIMES = Lifetimes()
# The purge runs 100 days from now: the Timestamps the service stamps today are old then.
PURGE_AT = datetime.now(UTC) + timedelta(days=100)


def expired(kind: str) -> datetime:
    """A day past the lifetime of ``kind`` when the purge runs."""
    return PURGE_AT - timedelta(days=getattr(LIFETIMES, kind) + 1)


def kept(kind: str) -> datetime:
    """A day within it."""
    return PURGE_AT - timedelta(days=getattr(LIFETIMES, kind) - 1)


def clock(moment: datetime) -> Callable[[], datetime]:
    return lambda: moment


@dataclass
class Storage:
    tables: dict[str, TableClient]
    containers: dict[str, ContainerClient]

    def keys(self) -> dict[str, set[tuple[str, str]]]:
        found = {
            name: {
                (e["PartitionKey"], e["RowKey"])
                for e in table.list_entities(select=["PartitionKey", "RowKey"])
            }
            for name, table in self.tables.items()
        }
        for name, container in self.containers.items():
            found[name] = {("", blob.name) for blob in container.list_blobs()}
        return found


@pytest.fixture
def storage(
    table_service_client: TableServiceClient, blob_service_client: BlobServiceClient
) -> Iterator[Storage]:
    """Every table and container of the app, under names of this test's own."""
    suffix = uuid.uuid4().hex[:10]
    tables = {name: table_service_client.create_table(f"{name}{suffix}") for name in APP_TABLES}
    containers = {
        name: blob_service_client.create_container(f"{name}-{suffix}") for name in APP_CONTAINERS
    }
    yield Storage(tables, containers)
    for table in tables.values():
        table_service_client.delete_table(table.table_name)
    for container in containers.values():
        container.delete_container()


def _purchase_letters(session: str, at: datetime, *, big: bool = False) -> list[DeadLetter]:
    letters = []
    for step in range(3, len(PURCHASE_TASKS) + 1):
        reason = "PaymentProviderUnavailable" if step == 3 else "SessionFailed"
        body = (b"x" * (70 * 1024)) if big and step == 4 else None  # a body kept in Blob Storage
        letters.append(
            dead_letter(
                purchase_message(session, step),
                reason,
                queue="purchase-tasks",
                session_id=session,
                enqueued_time=at,
                body=body,
            )
        )
    return letters


def _order(
    storage: Storage,
    job: str,
    at: datetime,
    *,
    steps: int,
    failed: bool = False,
    earlier_release: bool = False,
) -> str:
    """An order's records as its tasks leave them: accepted, charged at step 3, an order
    number and a receipt, and when its session ended (``steps`` all of them, or ``failed``)
    its outcome; run by an earlier release (``earlier_release``), a row per step recorded (the
    last failed when ``failed``) and no outcome."""
    progress = TableOrderProgress(storage.tables["orderprogress"])
    progress.accept(job, job, at.isoformat())
    for step in range(1, steps + 1 if earlier_release else 1):
        status: Literal["completed", "failed"] = (
            "failed" if failed and step == steps else "completed"
        )
        outcome = StepOutcome(step, PURCHASE_TASKS[step - 1], status, None, job, at.isoformat())
        progress.record(job, outcome)
    number = TableOrderNumbers(storage.tables["ordernumbers"]).allocate(job)
    TableSimulatedPaymentGateway(storage.tables["simulatedpayments"]).charge(
        idempotency_key=payment_idempotency_key(job),
        card_token="tok_visa",
        amount=Decimal("17.45"),
        currency="EUR",
    )
    BlobReceiptStore(storage.containers["receipts"]).save(number, b"%PDF-1.4 receipt")
    if (steps == len(PURCHASE_TASKS) or failed) and not earlier_release:
        TableSessionOutcomes(storage.tables["sessionoutcomes"]).record(
            SessionOutcome(
                job, job, "purchase", "failed" if failed else "completed", at.isoformat()
            )
        )
    return number


def test_one_purge_deletes_exactly_the_expired_records_and_a_kept_session_still_replays(
    storage: Storage,
) -> None:
    archive = TableDeadLetterArchive(
        storage.tables["deadletters"],
        storage.tables["failedsessions"],
        storage.containers[DEAD_LETTER_BODIES_CONTAINER],
    )
    audit = TableAuditTrail(storage.tables["operatoraudit"])

    # Orders: finished long ago, finished lately, running since long ago, and one that failed
    # long ago at ProcessPayment and that nobody acted on (kept whole for its replay).
    done_old = _order(storage, "order-done-old", expired("jobs"), steps=5)
    _order(storage, "order-done-new", kept("jobs"), steps=5)
    done_earlier = _order(
        storage, "order-earlier-old", expired("jobs"), steps=5, earlier_release=True
    )
    _order(storage, "order-running-old", expired("jobs"), steps=2)
    failed_number = _order(storage, "job-failed-old", expired("jobs"), steps=3, failed=True)
    # The processor's failure record of that order's session (its job is job-<session>).
    archive.record(
        "failed-old",
        FailureRecord(
            "ProcessPayment",
            3,
            "PaymentProviderUnavailable",
            "down",
            expired("jobs").isoformat(),
            {"order_number": failed_number},
        ),
    )

    # Failed sessions: replayed long ago, resolved long ago, replayed lately, and failed-old.
    queue = InMemoryDeadLetterQueue()
    for session in ("replayed-old", "resolved-old", "replayed-new", "failed-old"):
        queue.add(*_purchase_letters(session, expired("audit"), big=True))
    archive_dead_letters(queue, archive, queues=["purchase-tasks"])
    resender, seeder = InMemoryResender(), InMemorySessionSeeder()
    replay_session(
        archive,
        resender,
        seeder,
        "replayed-old",
        "k-1",
        clock=clock(expired("replayed_sessions")),
        pipelines=PIPELINES,
    )
    replay_session(
        archive,
        resender,
        seeder,
        "replayed-new",
        "k-2",
        clock=clock(kept("replayed_sessions")),
        pipelines=PIPELINES,
    )
    resolve_session(
        archive,
        InMemoryAuditTrail(),
        "resolved-old",
        "r-1",
        who="ada",
        note="dup",
        clock=clock(expired("resolved_sessions")),
    )

    # Another pipeline's jobs: ended long ago, and accepted long ago and still running.
    outcomes = TableSessionOutcomes(storage.tables["sessionoutcomes"])
    at = expired("jobs").isoformat()
    outcomes.record(SessionOutcome("onb-old", "onb-old", "onboarding", "completed", at))
    outcomes.accept(SessionOutcome("onb-running", "onb-running", "onboarding", "accepted", at))
    # Imports (saved today: long ago when the purge runs): one whose every row has an outcome,
    # one still importing.
    manifests = TableManifestStore(storage.tables["importjobs"])
    rows = TableImportProgress(storage.tables["importprogress"])
    for job, read in (("import-done", 2), ("import-running", 3)):
        manifests.save(JobManifest(job, "product-import-tasks", read, 0, read, {f"{job}-s": read}))
        for step in (1, 2):
            rows.record(job, f"{job}-s", step, status="imported", reason=None)

    # Records with a time of their own, each just past its lifetime and just within it.
    keys = TableIdempotencyRecords(storage.tables["idempotencykeys"])
    tokens = TableConfirmations(storage.tables["confirmations"])
    requests = TableReplayRequests(storage.tables["replayrequests"])
    old_token = ""
    for n, moment in ((1, expired), (2, kept)):
        keys.start(
            "orders", f"key-{n}", IdempotencyRecord("f", moment("idempotency_keys").isoformat())
        )
        token = tokens.issue(
            "replay", Selection(task="T"), 1, "d", moment("confirmations").isoformat()
        )
        old_token = old_token or token.token
        requests.save(
            ReplayRequest(
                f"00000000-0000-0000-0000-00000000000{n}",
                None,
                "T",
                None,
                status="completed",
                updated_at=moment("replay_requests").isoformat(),
            )
        )
        audit.record(AuditEntry(f"s-{n}", "resolve", "ada", moment("audit").isoformat(), "dup"))
    requests.save(
        ReplayRequest(
            "00000000-0000-0000-0000-000000000003",
            None,
            "T",
            None,
            status="running",
            updated_at=expired("replay_requests").isoformat(),
        )
    )

    before = storage.keys()
    report = purge_expired(
        TableRetention(storage.tables, storage.containers),
        archive,
        LIFETIMES,
        now=PURGE_AT,
        max_seconds=300,
    )
    after = storage.keys()

    def where(name: str, *prefixes: str, column: int = 0) -> set[tuple[str, str]]:
        return {k for k in before[name] if k[column].startswith(prefixes)}

    expected = {
        "deadletters": where("deadletters", "replayed-old", "resolved-old"),
        "failedsessions": where("failedsessions", "replayed-old", "resolved-old"),
        DEAD_LETTER_BODIES_CONTAINER: where(
            DEAD_LETTER_BODIES_CONTAINER,
            *map(_blob_prefix, ("replayed-old", "resolved-old")),
            column=1,
        ),
        "orderprogress": where("orderprogress", "order-done-old", "order-earlier-old"),
        "sessionoutcomes": where("sessionoutcomes", "order-done-old", "onb-old"),
        "simulatedpayments": where("simulatedpayments", "order-done-old", "order-earlier-old"),
        "ordernumbers": where("ordernumbers", "order-done-old", "order-earlier-old", column=1),
        "receipts": {("", f"{done_old}.pdf"), ("", f"{done_earlier}.pdf")},
        "importjobs": where("importjobs", "import-done"),
        "importprogress": where("importprogress", "import-done"),
        "idempotencykeys": where("idempotencykeys", "key-1", column=1),
        "confirmations": where("confirmations", old_token, column=1),
        "replayrequests": where("replayrequests", "00000000-0000-0000-0000-000000000001", column=1),
        "operatoraudit": where("operatoraudit", "s-1"),
    }
    gone = {name: before[name] - after[name] for name in before}
    assert all(expected.values()), expected  # each kind had something to purge
    assert {name: found for name, found in gone.items() if found} == expected
    assert not report.stopped_early
    assert report.total == sum(len(found) for found in gone.values())

    # The kept failed session replays as it would have before the purge, receipt and all.
    result = replay_session(archive, resender, seeder, "failed-old", "k-3", pipelines=PIPELINES)
    assert result.sent == 3
    assert resender.sent[-1][1] == result.new_session_id
    assert BlobReceiptStore(storage.containers["receipts"]).load(failed_number)


def _blob_prefix(session: str) -> str:
    """Where the archive keeps a session's large bodies (``TableDeadLetterArchive``)."""
    return hashlib.sha256(table_key(session).encode()).hexdigest()


def test_the_purge_deletes_in_transactions_of_100_and_a_run_cut_short_is_finished_by_the_next(
    storage: Storage, azurite_connection_string: str
) -> None:
    name = storage.tables["idempotencykeys"].table_name
    batches: list[str] = []
    counted = TableClient.from_connection_string(
        azurite_connection_string,
        name,
        raw_request_hook=lambda r: (
            batches.append(r.http_request.url) if r.http_request.url.endswith("$batch") else None
        ),
    )
    keys = TableIdempotencyRecords(counted)
    for n in range(250):
        keys.start(
            "orders", f"key-{n:03}", IdempotencyRecord("f", expired("idempotency_keys").isoformat())
        )
    # The budget (1.5 "seconds") runs out after the first transaction: each check of the
    # purge's clock says two more have passed.
    checks = itertools.count(0, 2)
    retention = TableRetention(
        {**storage.tables, "idempotencykeys": counted},
        storage.containers,
        monotonic=lambda: next(checks),
    )
    archive = TableDeadLetterArchive(
        storage.tables["deadletters"],
        storage.tables["failedsessions"],
        storage.containers[DEAD_LETTER_BODIES_CONTAINER],
    )

    first = purge_expired(
        retention, archive, LIFETIMES, now=PURGE_AT, max_seconds=1.5, monotonic=lambda: 0.0
    )
    left = len(storage.keys()["idempotencykeys"])
    second = purge_expired(
        TableRetention({**storage.tables, "idempotencykeys": counted}, storage.containers),
        archive,
        LIFETIMES,
        now=PURGE_AT,
        max_seconds=300,
    )

    assert first.stopped_early and 0 < left < 250
    assert not second.stopped_early
    assert storage.keys()["idempotencykeys"] == set()
    assert first.total + second.total == 250
    assert len(batches) == 3  # 100, 100, 50: one entity group transaction each
