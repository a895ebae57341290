"""Dead letters, the archive that keeps them and the replay that sends them again."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from ...domain.archive import (
    ArchivedMessage,
    FailedSession,
    FailureRecord,
    GroupKey,
    MessageCopy,
    ReplayClaim,
    SummaryFilter,
)
from ...domain.replays import ReplayRequest

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
