"""The outside world as the services see it. Each port has a real adapter in
``shared.adapters`` and an in-memory twin in ``tests/fakes.py`` for unit tests.

Names follow the Azure SDK's: ``get`` raises when the thing is missing, ``find`` returns None
(or leaves it out), ``list``/``of`` return an empty list."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, Generic, Protocol, TypeVar

from ..domain.archive import (
    ArchivedMessage,
    FailedSession,
    FailureRecord,
    GroupKey,
    MessageCopy,
    ReplayClaim,
    SummaryFilter,
)
from ..domain.envelope import TaskMessage
from ..domain.idempotency import IdempotencyRecord
from ..domain.import_jobs import JobManifest
from ..domain.order_status import OrderRecord, StepOutcome
from ..domain.payments import Charge
from ..domain.products import Product
from ..domain.receipt_emails import ReceiptEmail
from ..domain.receipts import Receipt
from ..domain.replays import ReplayRequest
from ..domain.session_outcomes import SessionOutcome


class SessionActions(Protocol):
    """What the processor may do with the session and the message it is handling."""

    def get_state(self) -> bytes | None:
        """The session's state as last set; None when it has none. (None is the state's
        value here, not a missing session: the SDK's ``get_session_state`` answers the same.)"""
        ...

    def set_state(self, state: bytes | None) -> None:
        """Replace the session's state; None clears it. A failure raises: the invocation
        fails and the message is delivered again."""
        ...

    def complete(self) -> None:
        """Settle the message as done; it is not delivered again. A failure raises: the
        message is delivered again (the processor is safe to re-run)."""
        ...

    def abandon(self) -> None:
        """Hand the message back for another delivery (its delivery count goes up)."""
        ...

    def dead_letter(self, reason: str, description: str) -> None:
        """Move the message to the dead-letter sub-queue with ``reason`` and
        ``description``; it is not delivered again."""
        ...

    def release_session(self) -> None:
        """Let the host take another session as soon as this invocation ends, instead of
        waiting sessionIdleTimeout for more messages: the session's last message is settled."""
        ...

    def renew_lock(self) -> datetime | None:
        """Renew the session's lock (an invocation that waits keeps its session); returns
        until when it is locked, when the host says."""
        ...


class OrderNumbers(Protocol):
    def allocate(self, job_id: str) -> str:
        """A new unique order number for the job; the same one again for the same job."""
        ...

    def find(self, job_id: str) -> str | None:
        """The job's order number, or None before one was allocated."""
        ...

    def find_job(self, order_number: str) -> str | None:
        """The job the order number was allocated to, or None."""
        ...


class ProductCatalog(Protocol):
    def find(self, skus: Sequence[str]) -> dict[str, Product]:
        """The products that exist among ``skus`` (missing ones are left out)."""
        ...

    def upsert(self, product: Product) -> None:
        """Insert or replace the product under its SKU; repeating it changes nothing."""
        ...

    def upsert_many(self, products: Sequence[Product]) -> None:
        """Create or replace each product, in as few requests as the store allows; a SKU given
        twice keeps its last product. Raises when any could not be written (a retry writes
        them all again)."""
        ...


class PaymentGateway(Protocol):
    def charge(
        self, *, idempotency_key: str, card_token: str, amount: Decimal, currency: str
    ) -> Charge:
        """Charge once per idempotency key: a repeat returns the first charge.
        Raises ``PaymentDeclined`` or ``PaymentProviderUnavailable``."""
        ...

    def find(self, idempotency_key: str) -> Charge | None:
        """The charge made under the key, or None."""
        ...


class ReceiptStore(Protocol):
    def save(self, order_number: str, pdf: bytes) -> str:
        """Store (overwrite) the receipt and return where it is."""
        ...

    def load(self, order_number: str) -> bytes:
        """The stored receipt, byte for byte; raises ``ReceiptNotFound`` when there is none."""
        ...


@dataclass(frozen=True)
class Attachment:
    filename: str
    content_type: str
    content: bytes


@dataclass(frozen=True)
class Email:
    to: str
    subject: str
    text: str
    message_id: str  # deterministic, so a re-sent copy can be recognised by the recipient
    attachments: tuple[Attachment, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Repeatability:
    """What makes a send repeatable: its request id (a GUID) and when it was first sent."""

    request_id: str
    first_sent: datetime


class EmailSender(Protocol):
    name: str  # "acs", "smtp": what the receipt's record says sent it
    # True: a send repeated with the same ``Repeatability`` within the service's window is
    # carried out once; False: a repeat sends the e-mail again.
    repeatable: bool

    def send(self, email: Email, *, repeat: Repeatability | None = None) -> str:
        """Deliver ``email``, following the send to its end; returns what the send is known
        by (the service's operation id, else the e-mail's Message-ID). Raises a transient or
        permanent task error, or ``MayHaveBeenSent`` when the service no longer knows whether
        a repeat's first attempt was carried out. Without ``repeat`` (or when not
        ``repeatable``), a repeat sends it again (with the same ``message_id``, so the
        recipient can tell)."""
        ...


class ReceiptEmails(Protocol):
    """The records of the jobs' receipt e-mails (``shared.domain.receipt_emails``)."""

    def create(self, record: ReceiptEmail) -> ReceiptEmail | None:
        """Write ``record`` unless the job has one: None when it was written, else the job's
        record as stored (which ``record`` did not replace)."""
        ...

    def save(self, record: ReceiptEmail) -> ReceiptEmail:
        """Write ``record`` over the job's; returns it as stored (``updated_at`` set)."""
        ...

    def find(self, job_id: str) -> ReceiptEmail | None:
        """The job's record, None when its receipt was never attempted."""
        ...


class TaskSender(Protocol):
    def send_session(
        self, queue_name: str, session_id: str, messages: Sequence[TaskMessage]
    ) -> None:
        """Send the messages of one session, in order, all or none."""
        ...


class ReceiptRenderer(Protocol):
    def render(self, receipt: Receipt) -> bytes:
        """The receipt as a PDF document."""
        ...


# -- dead letters, the archive and replay ---------------------------------------------------

T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    continuation: str | None = None  # opaque; pass it back for the next page


@dataclass(frozen=True)
class DeadLetter(MessageCopy):
    """A message received (peek-locked) from a queue's dead-letter sub-queue."""

    reason: str | None
    description: str | None
    enqueued_time: datetime | None
    delivery_count: int | None
    handle: Any = field(default=None, compare=False, repr=False)  # the adapter's own message


class DeadLetterReader(Protocol):
    def receive(self, max_messages: int) -> list[DeadLetter]:
        """Up to ``max_messages`` peek-locked dead letters; an empty list when there are none."""
        ...

    def complete(self, letters: Sequence[DeadLetter]) -> None:
        """Remove ``letters`` from the dead-letter sub-queue (after they are archived)."""
        ...


class DeadLetterSource(Protocol):
    def open(self, queue: str) -> AbstractContextManager[DeadLetterReader]:
        """A reader of ``queue``'s dead-letter sub-queue, closed when the block ends; letters
        it received and did not complete stay in the sub-queue."""
        ...


class DeadLetterArchive(Protocol):
    def save(self, rows: Sequence[ArchivedMessage]) -> int:
        """Upsert the rows of one session; return how many transactions it took."""
        ...

    def list_session(self, session_id: str, *, bodies: bool = True) -> list[ArchivedMessage]:
        """The session's rows in send order; empty when none are archived. With
        ``bodies=False`` the bodies may be left empty (a summary needs none: no Blob reads)."""
        ...

    def mark_replayed(self, rows: Sequence[ArchivedMessage]) -> None:
        """Store each row's replay status (``ArchivedMessage.replayed``); repeating it changes
        nothing."""
        ...

    def find_record(self, session_id: str) -> FailureRecord | None:
        """The failure record the processor journaled for the session, or None."""
        ...

    def save_summary(self, summary: FailedSession) -> None:
        """Store the session's summary (upsert); its failure record and claim stay as they
        are."""
        ...

    def get_summary(self, session_id: str) -> FailedSession:
        """Raises ``SessionNotArchived``."""
        ...

    def list_summaries(
        self, selected: SummaryFilter, *, page_size: int = 50, continuation: str | None = None
    ) -> Page[FailedSession]:
        """A page of the summaries ``selected``; raises ``InvalidInput`` ("continuation") for a
        token this archive did not hand out."""
        ...

    def count_sessions(self) -> Mapping[GroupKey, int]:
        """How many sessions there are of each (status, queue, failed task, reason): every
        session counted, cheaply enough for a page that asks every few seconds."""
        ...

    def count_failed_since(self, since: str) -> Mapping[str, int]:
        """How many sessions of each queue failed at ``since`` (an ISO time) or later, whatever
        they are now (failed, replayed, resolved); as cheap as ``count_sessions``."""
        ...

    def claim_replay(self, session_id: str, claim: ReplayClaim) -> ReplayClaim:
        """Record ``claim`` on the session's summary unless it holds one, atomically (of any
        number of concurrent claims exactly one is recorded); return the claim that holds.
        Raises ``SessionNotArchived`` when the session has no summary."""
        ...


class FailureJournal(Protocol):
    def record(self, session_id: str, record: FailureRecord) -> None:
        """Keep what a replay will need; called when a session is first marked failed."""
        ...


class Archive(DeadLetterArchive, FailureJournal, Protocol):
    """The archive is also where the processor journals a session's first failure."""


@dataclass(frozen=True)
class OutgoingMessage:
    body: bytes
    message_id: str
    content_type: str | None = None
    application_properties: Mapping[str, Any] = field(default_factory=dict)


class MessageResender(Protocol):
    def resend(self, queue_name: str, session_id: str, messages: Sequence[OutgoingMessage]) -> None:
        """Send raw messages under ``session_id``, in order."""
        ...


class SessionSeeder(Protocol):
    def seed(self, queue_name: str, session_id: str, state: bytes) -> None:
        """Set the state of a new session, unless it has a state already: a replay repeated
        after a crash may find the session half-way through, and must not rewind it."""
        ...


class ReplayRequestStore(Protocol):
    def save(self, request: ReplayRequest) -> None:
        """Store the request under its id (overwrites: a later save is its newer progress)."""
        ...

    def get(self, request_id: str) -> ReplayRequest:
        """Raises ``ReplayRequestNotFound``."""
        ...


class ReplayQueue(Protocol):
    def enqueue(self, request_id: str) -> None:
        """Queue the bulk request for the replay queue's trigger, which runs it."""
        ...


class IdempotencyRecords(Protocol):
    """One record per (scope, Idempotency-Key); ``version`` is the store's ETag."""

    def start(
        self, scope: str, key: str, record: IdempotencyRecord
    ) -> tuple[bool, IdempotencyRecord]:
        """Insert ``record`` unless the key has one: (True, the record as stored) or (False,
        the record found)."""
        ...

    def take_over(
        self, scope: str, key: str, stale: IdempotencyRecord, record: IdempotencyRecord
    ) -> IdempotencyRecord | None:
        """Replace ``stale`` with ``record`` if it is unchanged (its version); else None."""
        ...

    def finish(self, scope: str, key: str, record: IdempotencyRecord) -> None:
        """Store the finished request's result (overwrites)."""
        ...

    def release(self, scope: str, key: str, record: IdempotencyRecord) -> None:
        """Delete the record if it is still ``record`` (its version): the key is free again."""
        ...


class OrderProgress(Protocol):
    def accept(self, job_id: str, session_id: str, at: str) -> None:
        """Record that the order was accepted (before its tasks are enqueued); idempotent."""
        ...

    def withdraw(self, job_id: str, session_id: str) -> None:
        """Forget an acceptance whose tasks could not be enqueued; succeeds when there is
        none."""
        ...

    def record(self, job_id: str, outcome: StepOutcome) -> None:
        """Upsert the latest outcome of one step."""
        ...

    def find(self, job_id: str) -> OrderRecord | None:
        """The order's record, or None when it was never accepted."""
        ...

    def records(self, *, up_to: int) -> list[OrderRecord]:
        """The recorded orders, at most ``up_to`` of them (in no particular order)."""
        ...


@dataclass(frozen=True)
class RowOutcome:
    """The outcome of one import row, as ``ImportProgress.record`` takes it."""

    job_id: str
    session_id: str
    step: int | None
    status: str
    reason: str | None = None


class ImportProgress(Protocol):
    """Import row outcomes: one record per row (``record``, ``record_many``), or one per run
    of consecutive imported rows of a session (``record_run``). A row's own record wins over
    any run that covers it, so failed rows and replays are recorded row by row."""

    def record(
        self, job_id: str, session_id: str, step: int | None, *, status: str, reason: str | None
    ) -> None:
        """Upsert the outcome of one import row ("imported" or "failed")."""
        ...

    def record_many(self, rows: Sequence[RowOutcome]) -> None:
        """Upsert the outcomes of several rows, in as few requests as the store allows (one
        per partition and 100 rows); a row given twice keeps its last outcome."""
        ...

    def record_run(self, job_id: str, session_id: str, first_step: int, last_step: int) -> None:
        """Record rows ``first_step``..``last_step`` (inclusive) of the session as imported,
        in one record. A run that starts at the same step replaces it, whatever its length
        (a redelivered batch starts again at its first unfinished row); runs that overlap
        count each row once."""
        ...

    def counts(self, job_id: str, *, session_id: str | None = None) -> dict[str, int]:
        """Rows of the job (or of one session of it) by final status, each row once: its own
        record's status when it has one, else "imported" when a run covers it. Empty when
        none yet."""
        ...


class ImportManifests(Protocol):
    def get(self, job_id: str) -> JobManifest:
        """The manifest the Spark job saved once it sent the job's rows; raises
        ``ManifestNotFound`` before that (or for an unknown job)."""
        ...

    def list_manifests(self, *, up_to: int) -> list[JobManifest]:
        """The saved manifests, at most ``up_to`` of them (in no particular order)."""
        ...


class SessionOutcomes(Protocol):
    """How each session ended (``SessionOutcome``), recorded by the processor for every
    pipeline; one per session, overwritten when recorded again."""

    def record(self, outcome: SessionOutcome) -> None:
        """Store how the session ended (overwrites)."""
        ...

    def accept(self, outcome: SessionOutcome) -> None:
        """Record a session about to be sent, unless it already ended (a repeated start of a
        job that ran): never overwrites."""
        ...

    def withdraw(self, job_id: str, session_id: str) -> None:
        """Forget a session recorded as accepted whose messages could not be sent: only
        while it is still accepted (never an outcome); succeeds when there is none."""
        ...

    def find(self, job_id: str, session_id: str) -> SessionOutcome | None:
        """The session's outcome, or None when none was recorded."""
        ...

    def of_job(self, job_id: str) -> list[SessionOutcome]:
        """Every recorded session of the job, oldest first; empty when none ended yet."""
        ...
