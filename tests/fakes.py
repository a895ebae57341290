"""In-memory twins of the ports, for unit tests only. Each keeps what happened so a test can
inspect it (like dramatiq's stub broker exposes its dead letters)."""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import Decimal

from shared.domain import archive as domain
from shared.domain.audit import AuditEntry
from shared.domain.confirmations import Confirmation, ConfirmationRefused, Selection
from shared.domain.envelope import TaskMessage
from shared.domain.idempotency import IdempotencyRecord
from shared.domain.import_jobs import JobManifest, ManifestNotFound
from shared.domain.order_status import OrderRecord, StepOutcome
from shared.domain.pauses import ManualPause
from shared.domain.payments import Charge, PaymentDeclined, PaymentProviderUnavailable
from shared.domain.products import Product
from shared.domain.receipt_emails import ReceiptEmail
from shared.domain.receipts import Receipt
from shared.domain.replays import BulkAction, ReplayRequest, ReplayRequestNotFound
from shared.domain.session_outcomes import ACCEPTED, SessionOutcome
from shared.domain.time_windows import within
from shared.service_layer.dead_letters import archive_dead_letters
from shared.service_layer.ports import (
    DeadLetter,
    Email,
    OutgoingMessage,
    Page,
    Repeatability,
    RowOutcome,
)


class FakeTime:
    """A clock that moves only when slept on (or ``advance``d): ``sleep`` moves ``now`` and
    ``monotonic`` together and records what it slept."""

    def __init__(self, start: datetime) -> None:
        self.at = start
        self.elapsed = 0.0
        self.sleeps: list[float] = []
        # Each called after every sleep: a test's world changing while the processor waits.
        self.after_sleep: list[Callable[[FakeTime], object]] = []

    def now(self) -> datetime:
        return self.at

    def monotonic(self) -> float:
        return self.elapsed

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(seconds)
        for hook in self.after_sleep:
            hook(self)

    def advance(self, seconds: float) -> None:
        self.at += timedelta(seconds=seconds)
        self.elapsed += seconds


@dataclass
class InMemorySessionActions:
    """One session's state plus the settlement of the message being handled."""

    state: bytes | None = None
    settlements: list[tuple[str, ...]] = field(default_factory=list)
    state_writes: list[bytes | None] = field(default_factory=list)
    events: list[str] = field(default_factory=list)  # order of writes and settlements

    def get_state(self) -> bytes | None:
        return self.state

    def set_state(self, state: bytes | None) -> None:
        self.state = state
        self.state_writes.append(state)
        self.events.append("set_state")

    def complete(self) -> None:
        self.settlements.append(("complete",))
        self.events.append("complete")

    def abandon(self) -> None:
        self.settlements.append(("abandon",))
        self.events.append("abandon")

    def dead_letter(self, reason: str, description: str) -> None:
        self.settlements.append(("dead_letter", reason, description))
        self.events.append("dead_letter")

    def release_session(self) -> None:
        self.events.append("release_session")

    def renew_lock(self) -> datetime | None:
        self.events.append("renew_lock")
        return None  # the host did not say until when

    @property
    def renewals(self) -> int:
        return self.events.count("renew_lock")

    @property
    def released(self) -> bool:
        return "release_session" in self.events

    @property
    def last_settlement(self) -> tuple[str, ...]:
        return self.settlements[-1]


class InMemoryOrderNumbers:
    def __init__(self, prefix: str = "ORD-") -> None:
        self._prefix = prefix
        self._counter = itertools.count(1)
        self.by_job: dict[str, str] = {}

    def allocate(self, job_id: str) -> str:
        if job_id not in self.by_job:
            self.by_job[job_id] = f"{self._prefix}{next(self._counter):08d}"
        return self.by_job[job_id]

    def find(self, job_id: str) -> str | None:
        return self.by_job.get(job_id)

    def find_job(self, order_number: str) -> str | None:
        return next((job for job, number in self.by_job.items() if number == order_number), None)


class InMemoryProductCatalog:
    def __init__(self, products: Iterable[Product] = ()) -> None:
        self.products = {product.sku: product for product in products}

    def find(self, skus: Sequence[str]) -> dict[str, Product]:
        return {sku: self.products[sku] for sku in skus if sku in self.products}

    def upsert(self, product: Product) -> None:
        self.products[product.sku] = product

    def upsert_many(self, products: Sequence[Product]) -> None:
        for product in products:
            self.upsert(product)


class InMemoryPaymentGateway:
    def __init__(
        self, *, decline_tokens: Iterable[str] = (), outage_tokens: Iterable[str] = ()
    ) -> None:
        self.decline_tokens = set(decline_tokens)
        self.outage_tokens = set(outage_tokens)
        self.charges: dict[str, Charge] = {}
        self.calls = 0

    def charge(
        self, *, idempotency_key: str, card_token: str, amount: Decimal, currency: str
    ) -> Charge:
        self.calls += 1
        if idempotency_key in self.charges:
            return self.charges[idempotency_key]
        if card_token in self.outage_tokens or "*" in self.outage_tokens:
            raise PaymentProviderUnavailable("the payment provider is not answering")
        if card_token in self.decline_tokens:
            raise PaymentDeclined(f"card {card_token} was declined")
        charge = Charge(f"ch_{len(self.charges) + 1}", idempotency_key, amount, currency)
        self.charges[idempotency_key] = charge
        return charge

    def find(self, idempotency_key: str) -> Charge | None:
        return self.charges.get(idempotency_key)


class InMemoryReceiptStore:
    def __init__(self) -> None:
        self.receipts: dict[str, bytes] = {}

    def save(self, order_number: str, pdf: bytes) -> str:
        self.receipts[order_number] = pdf
        return f"receipts/{order_number}.pdf"

    def load(self, order_number: str) -> bytes:
        return self.receipts[order_number]


class InMemoryReceiptRenderer:
    def __init__(self) -> None:
        self.rendered: list[Receipt] = []

    def render(self, receipt: Receipt) -> bytes:
        self.rendered.append(receipt)
        return f"%PDF-fake {receipt.order_number} {receipt.total}".encode()


class InMemoryEmailSender:
    """Repeatable as Azure Communication Services Email is: a send repeated with the same
    request id is not sent again (no window: ``outside_window`` names the request ids it
    answers as past it, ``MayHaveBeenSent``)."""

    name = "memory"

    def __init__(self, *, repeatable: bool = True) -> None:
        self.repeatable = repeatable
        self.sent: list[Email] = []
        self.requests: dict[str, str] = {}  # request id -> operation id
        self.outside_window: set[str] = set()

    def send(self, email: Email, *, repeat: Repeatability | None = None) -> str:
        from shared.domain.errors import MayHaveBeenSent

        if repeat is not None and repeat.request_id in self.outside_window:
            raise MayHaveBeenSent("past the window")
        if repeat is not None and self.repeatable and repeat.request_id in self.requests:
            return self.requests[repeat.request_id]
        self.sent.append(email)
        operation_id = f"op-{len(self.sent)}"
        if repeat is not None:
            self.requests[repeat.request_id] = operation_id
        return operation_id


class InMemoryReceiptEmails:
    def __init__(self) -> None:
        self.records: dict[str, ReceiptEmail] = {}

    def create(self, record: ReceiptEmail) -> ReceiptEmail | None:
        stored = self.records.get(record.job_id)
        if stored is None:
            self.records[record.job_id] = record
        return stored

    def save(self, record: ReceiptEmail) -> ReceiptEmail:
        self.records[record.job_id] = record
        return record

    def find(self, job_id: str) -> ReceiptEmail | None:
        return self.records.get(job_id)


class InMemoryTaskSender:
    def __init__(self) -> None:
        self.sessions: list[tuple[str, str, list[TaskMessage]]] = []

    def send_session(
        self, queue_name: str, session_id: str, messages: Sequence[TaskMessage]
    ) -> None:
        self.sessions.append((queue_name, session_id, list(messages)))


# -- dead letters, archive, replay ------------------------------------------------------------


class InMemoryDeadLetterQueue:
    """The dead-letter sub-queues of some queues. ``open`` gives a reader that peek-locks;
    letters received but not completed go back when the reader closes."""

    def __init__(self) -> None:
        self.letters: dict[str, list[DeadLetter]] = {}
        self.completed: list[DeadLetter] = []
        self.crash_on_complete: Exception | None = None  # simulate a worker dying

    def add(self, *letters: DeadLetter) -> None:
        for letter in letters:
            self.letters.setdefault(letter.queue, []).append(letter)

    @contextmanager
    def open(self, queue: str) -> Iterator[InMemoryDeadLetterReader]:
        reader = InMemoryDeadLetterReader(self, queue)
        try:
            yield reader
        finally:
            # Not completed: the lock is released and the letters are available again.
            self.letters.setdefault(queue, [])[:0] = reader.locked
            reader.locked = []


class InMemoryDeadLetterReader:
    def __init__(self, dlq: InMemoryDeadLetterQueue, queue: str) -> None:
        self._dlq = dlq
        self._queue = queue
        self.locked: list[DeadLetter] = []

    def receive(self, max_messages: int) -> list[DeadLetter]:
        available = self._dlq.letters.get(self._queue, [])
        taken, available[:] = available[:max_messages], available[max_messages:]
        self.locked.extend(taken)
        return taken

    def complete(self, letters: Sequence[DeadLetter]) -> None:
        if self._dlq.crash_on_complete is not None:
            raise self._dlq.crash_on_complete
        for letter in letters:
            self.locked.remove(letter)
            self._dlq.completed.append(letter)


class InMemoryDeadLetterArchive:
    """Claims are kept apart from the summaries (as the table keeps them in their own
    columns) and made under a lock, so of concurrent claims exactly one is recorded."""

    TRANSACTION_LIMIT = 100

    def __init__(self) -> None:
        self.rows: dict[str | None, dict[str, domain.ArchivedMessage]] = {}
        self.records: dict[str, domain.FailureRecord] = {}
        self.summaries: dict[str, domain.FailedSession] = {}
        self.claims: dict[str, domain.ReplayClaim] = {}
        self.transactions = 0
        self._lock = threading.Lock()

    # FailureJournal
    def record(self, session_id: str, record: domain.FailureRecord) -> None:
        self.records[session_id] = record

    def save(self, rows: Sequence[domain.ArchivedMessage]) -> int:
        assert len({row.session_id for row in rows}) <= 1, "one partition per call"
        for row in rows:
            self.rows.setdefault(row.session_id, {})[row.row_key] = row
        used = -(-len(rows) // self.TRANSACTION_LIMIT)
        self.transactions += used
        return used

    def list_session(self, session_id: str, *, bodies: bool = True) -> list[domain.ArchivedMessage]:
        partition = self.rows.get(session_id, {})
        return [partition[key] for key in sorted(partition)]

    def mark_replayed(self, rows: Sequence[domain.ArchivedMessage]) -> None:
        self.save(rows)

    def find_record(self, session_id: str) -> domain.FailureRecord | None:
        return self.records.get(session_id)

    def save_summary(self, summary: domain.FailedSession) -> None:
        self.summaries[summary.session_id] = summary

    def get_summary(self, session_id: str) -> domain.FailedSession:
        if session_id not in self.summaries:
            raise domain.SessionNotArchived(session_id)
        summary, claim = self.summaries[session_id], self.claims.get(session_id)
        return replace(summary, claim=claim, status=domain.status_with(summary.status, claim))

    def claim_replay(self, session_id: str, claim: domain.ReplayClaim) -> domain.ReplayClaim:
        with self._lock:
            if session_id not in self.summaries:
                raise domain.SessionNotArchived(session_id)
            return self.claims.setdefault(session_id, claim)

    def list_summaries(
        self,
        selected: domain.SummaryFilter,
        *,
        page_size: int = 50,
        continuation: str | None = None,
    ) -> Page[domain.FailedSession]:
        matching = [
            self.get_summary(key)
            for key, s in sorted(self.summaries.items())
            if (selected.queue is None or s.queue == selected.queue)
            and (selected.task is None or s.failed_task == selected.task)
            and (selected.reason is None or s.reason == selected.reason)
            and (continuation is None or key >= continuation)
        ]
        in_window = within(selected.failed_from, selected.failed_to)
        matching = [
            s for s in matching if selected.status in (None, s.status) and in_window(s.failed_at)
        ]
        page = matching[:page_size]
        rest = matching[page_size:]
        return Page(page, rest[0].session_id if rest else None)

    def count_sessions(self) -> Counter[domain.GroupKey]:
        return Counter(
            (s.status, s.queue, s.failed_task, s.reason)
            for s in map(self.get_summary, self.summaries)
        )

    def count_failed_since(self, since: str) -> Counter[str]:
        return Counter(
            s.queue for s in self.summaries.values() if s.failed_at and s.failed_at >= since
        )


def archive_holding(*letters: DeadLetter) -> InMemoryDeadLetterArchive:
    """A fresh archive after an archive run over the dead-letter queues holding ``letters``."""
    dlq, archive = InMemoryDeadLetterQueue(), InMemoryDeadLetterArchive()
    dlq.add(*letters)
    archive_dead_letters(dlq, archive, queues=sorted(dlq.letters))
    return archive


class InMemoryResender:
    def __init__(self, *, seen_ids: set[str] | None = None) -> None:
        self.sent: list[tuple[str, str, OutgoingMessage]] = []
        self._seen = seen_ids if seen_ids is not None else set()  # duplicate detection

    def resend(self, queue_name: str, session_id: str, messages: Sequence[OutgoingMessage]) -> None:
        for message in messages:
            if message.message_id in self._seen:
                continue
            self._seen.add(message.message_id)
            self.sent.append((queue_name, session_id, message))


class InMemorySessionSeeder:
    def __init__(self) -> None:
        self.states: dict[tuple[str, str], bytes] = {}

    def seed(self, queue_name: str, session_id: str, state: bytes) -> None:
        self.states.setdefault((queue_name, session_id), state)


class InMemoryReplayRequests:
    def __init__(self) -> None:
        self.requests: dict[str, ReplayRequest] = {}
        self.queued: list[str] = []

    def save(self, request: ReplayRequest) -> None:
        self.requests[request.request_id] = request

    def get(self, request_id: str) -> ReplayRequest:
        if request_id not in self.requests:
            raise ReplayRequestNotFound(request_id)
        return self.requests[request_id]

    # ReplayQueue
    def enqueue(self, request_id: str) -> None:
        self.queued.append(request_id)


class InMemoryIdempotencyRecords:
    """Versions count writes, as ETags change on every write; every call is atomic."""

    def __init__(self) -> None:
        self.records: dict[tuple[str, str], IdempotencyRecord] = {}
        self._versions = itertools.count(1)
        self._lock = threading.Lock()

    def start(
        self, scope: str, key: str, record: IdempotencyRecord
    ) -> tuple[bool, IdempotencyRecord]:
        with self._lock:
            found = self.records.get((scope, key))
            if found is not None:
                return False, found
            return True, self._write(scope, key, record)

    def take_over(
        self, scope: str, key: str, stale: IdempotencyRecord, record: IdempotencyRecord
    ) -> IdempotencyRecord | None:
        with self._lock:
            if self.records.get((scope, key)) != stale:
                return None
            return self._write(scope, key, record)

    def finish(self, scope: str, key: str, record: IdempotencyRecord) -> None:
        with self._lock:
            self._write(scope, key, record)

    def release(self, scope: str, key: str, record: IdempotencyRecord) -> None:
        with self._lock:
            if self.records.get((scope, key)) == record:
                del self.records[(scope, key)]

    def _write(self, scope: str, key: str, record: IdempotencyRecord) -> IdempotencyRecord:
        stored = replace(record, version=str(next(self._versions)))
        self.records[(scope, key)] = stored
        return stored


class InMemoryOrderProgress:
    def __init__(self) -> None:
        self.accepted: dict[str, tuple[str, str]] = {}
        self.steps: dict[str, dict[int, StepOutcome]] = {}

    def accept(self, job_id: str, session_id: str, at: str) -> None:
        self.accepted[job_id] = (session_id, at)

    def withdraw(self, job_id: str, session_id: str) -> None:
        self.accepted.pop(job_id, None)

    def record(self, job_id: str, outcome: StepOutcome) -> None:
        self.steps.setdefault(job_id, {})[outcome.step] = outcome

    def find(self, job_id: str) -> OrderRecord | None:
        if job_id not in self.accepted and job_id not in self.steps:
            return None
        session_id, at = self.accepted.get(job_id, (None, None))
        steps = self.steps.get(job_id, {})
        return OrderRecord(job_id, session_id, at, tuple(steps[n] for n in sorted(steps)))

    def records(self, *, up_to: int) -> list[OrderRecord]:
        jobs = sorted({*self.accepted, *self.steps})[:up_to]
        return [record for job in jobs if (record := self.find(job)) is not None]


# -- product imports --------------------------------------------------------------------------


class InMemoryImportProgress:
    """One outcome per (job, session, step), overwritten when recorded again; one run per
    (job, session, first step), replaced when recorded again. A step's own outcome wins over
    the runs that cover it."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str, int | None], tuple[str, str | None]] = {}
        self.runs: dict[tuple[str, str, int], int] = {}  # (job, session, first) -> last

    def record(
        self, job_id: str, session_id: str, step: int | None, *, status: str, reason: str | None
    ) -> None:
        self.rows[(job_id, session_id, step)] = (status, reason)

    def record_many(self, rows: Sequence[RowOutcome]) -> None:
        for row in rows:
            self.record(row.job_id, row.session_id, row.step, status=row.status, reason=row.reason)

    def record_run(self, job_id: str, session_id: str, first_step: int, last_step: int) -> None:
        self.runs[(job_id, session_id, first_step)] = last_step

    def statuses(self) -> dict[tuple[str, str, int | None], str]:
        """Each recorded row's status, by (job, session, step)."""
        statuses: dict[tuple[str, str, int | None], str] = {}
        for (job, session, first), last in self.runs.items():
            for step in range(first, last + 1):
                statuses[(job, session, step)] = "imported"
        statuses |= {key: status for key, (status, _) in self.rows.items()}
        return statuses

    def counts(self, job_id: str, *, session_id: str | None = None) -> dict[str, int]:
        counts: dict[str, int] = {}
        for (job, session, _), status in self.statuses().items():
            if job == job_id and session_id in (None, session):
                counts[status] = counts.get(status, 0) + 1
        return counts


class InMemorySessionOutcomes:
    """One outcome per (job, session), overwritten when recorded again."""

    def __init__(self) -> None:
        self.outcomes: dict[tuple[str, str], SessionOutcome] = {}

    def record(self, outcome: SessionOutcome) -> None:
        self.outcomes[(outcome.job_id, outcome.session_id)] = outcome

    def accept(self, outcome: SessionOutcome) -> None:
        self.outcomes.setdefault((outcome.job_id, outcome.session_id), outcome)

    def withdraw(self, job_id: str, session_id: str) -> None:
        found = self.outcomes.get((job_id, session_id))
        if found is not None and found.status == ACCEPTED:
            del self.outcomes[(job_id, session_id)]

    def find(self, job_id: str, session_id: str) -> SessionOutcome | None:
        return self.outcomes.get((job_id, session_id))

    def of_job(self, job_id: str) -> list[SessionOutcome]:
        mine = [o for (job, _), o in self.outcomes.items() if job == job_id]
        return sorted(mine, key=lambda o: (o.at, o.session_id))

    def of_pipeline(self, pipeline: str, *, up_to: int) -> list[SessionOutcome]:
        return [o for o in self.outcomes.values() if o.pipeline == pipeline][:up_to]

    def latest_of_pipeline(self, pipeline: str, *, up_to: int) -> dict[str, SessionOutcome]:
        latest: dict[str, SessionOutcome] = {}
        for outcome in sorted(self.outcomes.values(), key=lambda o: (o.at, o.session_id)):
            if outcome.pipeline == pipeline:
                latest[outcome.job_id] = outcome
        return {job: latest[job] for job in sorted(latest)[:up_to]}


class InMemoryImportManifests:
    def __init__(self) -> None:
        self.manifests: dict[str, JobManifest] = {}

    def save(self, manifest: JobManifest) -> None:
        self.manifests[manifest.job_id] = manifest

    def get(self, job_id: str) -> JobManifest:
        if job_id not in self.manifests:
            raise ManifestNotFound(job_id)
        return self.manifests[job_id]

    def list_manifests(self, *, up_to: int) -> list[JobManifest]:
        return list(self.manifests.values())[:up_to]


class InMemoryAuditTrail:
    """An entry with a key is kept once per (session, action, key), as the table keeps it."""

    def __init__(self) -> None:
        self.entries: list[AuditEntry] = []

    def record(self, entry: AuditEntry) -> None:
        if entry.key and any(
            (e.session_id, e.action, e.key) == (entry.session_id, entry.action, entry.key)
            for e in self.entries
        ):
            return
        self.entries.append(entry)

    def history(self, session_id: str) -> list[AuditEntry]:
        return sorted((e for e in self.entries if e.session_id == session_id), key=lambda e: e.at)

    def between(self, start: str | None, end: str | None, *, up_to: int) -> list[AuditEntry]:
        return [e for e in self.entries if within(start, end)(e.at)][:up_to]


class InMemoryConfirmations:
    """Tokens redeemed once, under a lock (the table redeems under the row's ETag)."""

    def __init__(self) -> None:
        self.issued: dict[str, Confirmation] = {}
        self.redeemed: set[str] = set()
        self._lock = threading.Lock()
        self._tokens = itertools.count(1)

    def issue(
        self, action: BulkAction, selection: Selection, sessions: int, digest: str, expires_at: str
    ) -> Confirmation:
        token = f"token-{next(self._tokens)}"
        self.issued[token] = Confirmation(token, action, selection, sessions, digest, expires_at)
        return self.issued[token]

    def redeem(self, token: str) -> Confirmation:
        with self._lock:
            if token not in self.issued or token in self.redeemed:
                raise ConfirmationRefused("This confirmation is unknown or was used already.")
            self.redeemed.add(token)
            return self.issued[token]


class InMemoryPipelinePauses:
    """PipelinePauses in a dict; ``reads`` counts the gets (a gate reads at most once per
    its time to live)."""

    def __init__(self) -> None:
        self.pauses: dict[str, ManualPause] = {}
        self.reads = 0

    def find(self, pipeline: str) -> ManualPause | None:
        self.reads += 1
        return self.pauses.get(pipeline)

    def pause(self, pipeline: str, pause: ManualPause) -> ManualPause:
        return self.pauses.setdefault(pipeline, pause)

    def resume(self, pipeline: str) -> ManualPause | None:
        return self.pauses.pop(pipeline, None)


class InMemoryDeadLetterCounter:
    """DeadLetterCounter over fixed counts per queue."""

    def __init__(self, counts: dict[str, int] | None = None) -> None:
        self.counts = dict(counts or {})

    def waiting(self, queue: str, *, up_to: int) -> int:
        return min(self.counts.get(queue, 0), up_to)
