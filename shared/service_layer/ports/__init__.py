"""The outside world as the services see it, one module per area. Each port has a real adapter in
``shared.adapters`` and an in-memory twin under ``tests/`` (``tests/fakes.py``) for unit tests.

Names follow the Azure SDK's: ``get`` raises when the thing is missing, ``find`` returns None
(or leaves it out), ``list``/``of`` return an empty list."""

from __future__ import annotations

from .archive import (
    Archive,
    DeadLetter,
    DeadLetterArchive,
    DeadLetterReader,
    DeadLetterSource,
    FailureJournal,
    MessageResender,
    OutgoingMessage,
    Page,
    ReplayQueue,
    ReplayRequestStore,
    SessionSeeder,
)
from .emails import Attachment, Email, EmailSender, Repeatability
from .jobs import IdempotencyRecords, ImportManifests, ImportProgress, RowOutcome
from .purchase import (
    OrderNumbers,
    OrderProgress,
    PaymentGateway,
    ProductCatalog,
    ReceiptEmails,
    ReceiptRenderer,
    ReceiptStore,
)
from .sessions import SessionActions, SessionOutcomes, TaskSender

__all__ = [
    "Archive",
    "Attachment",
    "DeadLetter",
    "DeadLetterArchive",
    "DeadLetterReader",
    "DeadLetterSource",
    "Email",
    "EmailSender",
    "FailureJournal",
    "IdempotencyRecords",
    "ImportManifests",
    "ImportProgress",
    "MessageResender",
    "OrderNumbers",
    "OrderProgress",
    "OutgoingMessage",
    "Page",
    "PaymentGateway",
    "ProductCatalog",
    "ReceiptEmails",
    "ReceiptRenderer",
    "ReceiptStore",
    "Repeatability",
    "ReplayQueue",
    "ReplayRequestStore",
    "RowOutcome",
    "SessionActions",
    "SessionOutcomes",
    "SessionSeeder",
    "TaskSender",
]
