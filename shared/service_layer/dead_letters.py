"""Move dead letters from Service Bus into the archive, a bounded amount per run.

Each dead letter is completed only after its row is written (upsert), so a crash in between
leaves the message in the dead-letter queue and the next run writes the same row again:
nothing is lost and nothing is duplicated. A message Service Bus dead-lettered itself
(``BROKER_REASONS``: no processor settled it) is also told to its pipeline's observer before
it is completed, so an import's row counts and an order's steps record it as the processor
records its own dead letters (an upsert: a run repeated after a crash records it again).
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields

from ..domain.archive import ArchivedMessage, MessageCopy, routing_of, summarize
from ..domain.envelope import TaskMessage, parse_task_message
from ..domain.errors import MalformedMessage
from ..domain.reasons import BROKER_REASONS
from ..telemetry.context import trace_id_of
from ..telemetry.operations import count_archived, operation_span
from .clock import Clock, utc_now
from .ports import DeadLetter, DeadLetterArchive, DeadLetterSource
from .session_messages import IncomingMessage, Observer, Outcome

logger = logging.getLogger(__name__)

NO_REASON = "(none)"


@dataclass
class ArchiveReport:
    moved: dict[str, int] = field(default_factory=dict)  # per queue
    sessions: set[str | None] = field(default_factory=set)
    transactions: int = 0
    stopped_early: bool = False  # the count or time bound was reached: more may be waiting

    @property
    def total(self) -> int:
        return sum(self.moved.values())


def archive_dead_letters(
    source: DeadLetterSource,
    archive: DeadLetterArchive,
    *,
    queues: Sequence[str],
    max_messages: int = 1000,
    max_seconds: float = 60.0,
    batch_size: int = 100,
    clock: Clock = utc_now,
    monotonic: Callable[[], float] = time.monotonic,
    observers: Mapping[str, Observer] | None = None,
) -> ArchiveReport:
    """Archive at most ``max_messages`` dead letters, stopping after ``max_seconds``. The run
    is a span; each archived row keeps the trace id its message was sent in. ``observers``:
    each queue's pipeline observer, told of the messages Service Bus dead-lettered itself."""
    with operation_span("archive dead letters", attributes={"messaging.system": "servicebus"}):
        report = _archive(
            source,
            archive,
            queues,
            max_messages,
            max_seconds,
            batch_size,
            clock,
            monotonic,
            observers or {},
        )
        logger.info(
            "Archived %d dead letter(s) from %s in %d transaction(s), %d session(s)%s",
            report.total,
            ", ".join(f"{q}: {n}" for q, n in report.moved.items()) or "no queue",
            report.transactions,
            len(report.sessions),
            "; stopped at the bound, more may be waiting" if report.stopped_early else "",
        )
    return report


def _archive(
    source: DeadLetterSource,
    archive: DeadLetterArchive,
    queues: Sequence[str],
    max_messages: int,
    max_seconds: float,
    batch_size: int,
    clock: Clock,
    monotonic: Callable[[], float],
    observers: Mapping[str, Observer],
) -> ArchiveReport:
    report = ArchiveReport()
    deadline = monotonic() + max_seconds
    for queue in queues:
        report.moved.setdefault(queue, 0)
        with source.open(queue) as reader:
            while True:
                if report.total >= max_messages or monotonic() >= deadline:
                    report.stopped_early = True
                    break
                letters = reader.receive(min(batch_size, max_messages - report.total))
                if not letters:
                    break
                for session_id, group in _by_session(letters).items():
                    rows = [_row(letter, clock) for letter in group]
                    report.transactions += archive.save(rows)
                    if session_id is not None:
                        _refresh_summary(archive, session_id)
                    if (observer := observers.get(queue)) is not None:
                        _tell_broker_dead_letters(observer, group)
                    reader.complete(group)  # only after the rows are safely written
                    report.sessions.add(session_id)
                    report.moved[queue] += len(group)
                    count_archived(len(group), queue=queue)
        if report.stopped_early:
            break
    return report


def _tell_broker_dead_letters(observer: Observer, letters: Sequence[DeadLetter]) -> None:
    for letter in letters:
        if letter.reason not in BROKER_REASONS or not letter.session_id:
            continue
        try:
            message: TaskMessage | None = parse_task_message(letter.body)
        except MalformedMessage:
            message = None
        incoming = IncomingMessage(
            body=letter.body,
            session_id=letter.session_id,
            delivery_count=letter.delivery_count,
            message_id=letter.message_id,
            application_properties=dict(letter.application_properties),
        )
        observer(incoming, message, Outcome.DEAD_LETTERED, letter.reason)


def _by_session(letters: Sequence[DeadLetter]) -> dict[str | None, list[DeadLetter]]:
    groups: dict[str | None, list[DeadLetter]] = defaultdict(list)
    for letter in letters:
        groups[letter.session_id].append(letter)
    return groups


def _row(letter: DeadLetter, clock: Clock) -> ArchivedMessage:
    routing = routing_of(letter.body, letter.application_properties)
    copy = {part.name: getattr(letter, part.name) for part in fields(MessageCopy)}
    copy["application_properties"] = dict(letter.application_properties)
    return ArchivedMessage(
        **copy,
        reason=letter.reason or NO_REASON,
        description=letter.description or "",
        enqueued_time=letter.enqueued_time.isoformat() if letter.enqueued_time else None,
        delivery_count=letter.delivery_count,
        archived_at=clock().isoformat(),
        trace_id=trace_id_of(letter.application_properties),
        **routing,
    )


def _refresh_summary(archive: DeadLetterArchive, session_id: str) -> None:
    rows = archive.list_session(session_id, bodies=False)
    archive.save_summary(summarize(session_id, rows, archive.find_record(session_id)))
