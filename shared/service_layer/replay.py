"""Replay a failed session: send its archived messages again, in the original order, under a
new session id seeded with the failed session's context; and bulk replays of every session
that failed the same way, run from a storage queue so no HTTP request waits on them.

A purchase session stops at its first failure, so every later message is dead-lettered too:
its replay waits until the archive holds the session's last message. An import session goes
on past a bad row: its archive holds only the bad rows, each standing alone, and they are
replayed as they are, the last one sent marked ``is_last`` so that it clears the new session's
state (docs/dead-letters.md, "Import sessions")."""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from ..domain.archive import (
    FAILED,
    REPLAYED,
    AlreadyReplayed,
    ArchivedMessage,
    FailedSession,
    ReplayIncomplete,
    SessionNotArchived,
    pipeline_of,
    replay_session_id,
    summarize,
)
from ..domain.envelope import marked_last
from ..domain.errors import InvalidInput
from ..domain.pipelines import stops_on_failure
from ..domain.replays import ReplayRequest
from ..domain.session_state import SessionState
from .ports import (
    DeadLetterArchive,
    MessageResender,
    OutgoingMessage,
    ReplayQueue,
    ReplayRequestStore,
    SessionSeeder,
)

logger = logging.getLogger(__name__)

Clock = Callable[[], datetime]


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class ReplayResult:
    session_id: str
    new_session_id: str
    queue: str
    sent: int  # 0 when a repeated request found everything already sent


def replay_session(
    archive: DeadLetterArchive,
    resender: MessageResender,
    seeder: SessionSeeder,
    session_id: str,
    idempotency_key: str,
    *,
    force: bool = False,
    bodies: Mapping[str, bytes] | None = None,
    clock: Clock = _now,
) -> ReplayResult:
    """Send the session's archived messages that are not replayed yet, in send order, under
    ``replay_session_id(session_id, idempotency_key)``; repeating it sends nothing twice.
    ``bodies`` (row key -> body) replaces the bodies of edited messages in what is sent; the
    archive keeps the originals.

    A session of a pipeline that stops on failure (purchase) is refused with
    ``ReplayIncomplete`` until its last message is archived, unless ``force``; an import
    session never is. Raises ``SessionNotArchived``, ``ReplayIncomplete`` or
    ``AlreadyReplayed``."""
    if not idempotency_key.strip():
        raise InvalidInput("Idempotency-Key", "is required: any unique string, e.g. a UUID")
    rows = archive.list_session(session_id)
    if not rows:
        raise SessionNotArchived(session_id)
    whole_session = stops_on_failure(pipeline_of(rows))
    if whole_session and not force and not any(row.is_last for row in rows):
        raise ReplayIncomplete(session_id, len(rows))
    elsewhere = [r for r in rows if r.status == REPLAYED and r.replay_key != idempotency_key]
    if elsewhere:
        raise AlreadyReplayed(session_id, elsewhere[0].replayed_session_id)

    queue = rows[0].queue
    new_session_id = replay_session_id(session_id, idempotency_key)
    pending = [row for row in rows if row.status != REPLAYED]
    record = archive.get_record(session_id)
    if pending:
        if len(pending) == len(rows):
            # Start the new session where the failed one stopped, knowing what it knew. An
            # import session is seeded too: with no state, the processor would take a retried
            # is_last row for one that already ran and cleared the state.
            seed = SessionState(
                next_step=rows[0].step or 1,
                context=dict(record.context) if record else {},
            )
            seeder.seed(queue, new_session_id, seed.to_bytes())
        # The bad rows of an import seldom include its last: the last archived row closes the
        # new session. Not a purchase: its later messages may still reach the archive.
        closing = None if whole_session else rows[-1].row_key
        resender.resend(
            queue,
            new_session_id,
            [
                _outgoing(
                    replace(row, body=(bodies or {}).get(row.row_key, row.body)),
                    session_id,
                    new_session_id,
                    last=row.row_key == closing,
                )
                for row in pending
            ],
        )
        at = clock().isoformat()
        archive.mark_replayed(
            [row.replayed(session_id=new_session_id, key=idempotency_key, at=at) for row in pending]
        )
        logger.info(
            "Replayed %d message(s) of session %s as %s on %s",
            len(pending),
            session_id,
            new_session_id,
            queue,
        )
    # Also when nothing was pending: a run that died after marking the rows left it stale.
    rows_now = archive.list_session(session_id, bodies=False)
    archive.save_summary(summarize(session_id, rows_now, record))
    return ReplayResult(session_id, new_session_id, queue, sent=len(pending))


def _outgoing(
    row: ArchivedMessage, session_id: str, new_session_id: str, *, last: bool
) -> OutgoingMessage:
    properties = {**row.application_properties, "replay_of": session_id}
    if last:
        properties["is_last"] = True
    return OutgoingMessage(
        body=marked_last(row.body) if last else row.body,
        # Deterministic: a repeated request is dropped by duplicate detection.
        message_id=f"{new_session_id}:{row.row_key}",
        content_type=row.content_type,
        application_properties=properties,
    )


# -- bulk replays ---------------------------------------------------------------------------

MAX_RECORDED_ERRORS = 50


def request_bulk_replay(
    store: ReplayRequestStore,
    queue: ReplayQueue,
    *,
    queue_name: str | None = None,
    task: str | None = None,
    reason: str | None = None,
    clock: Clock = _now,
) -> ReplayRequest:
    if not (task or reason):
        raise InvalidInput("task", "give a task and/or a reason to choose the sessions to replay")
    at = clock().isoformat()
    request = ReplayRequest(
        request_id=str(uuid.uuid4()),
        queue=queue_name,
        task=task,
        reason=reason,
        created_at=at,
        updated_at=at,
    )
    store.save(request)
    try:
        queue.enqueue(request.request_id)
    except Exception as error:
        # Saved but never queued: without this it would say "queued" forever.
        failed = replace(
            request,
            status="failed",
            failure=f"Could not queue the request ({error.__class__.__name__}); nothing was "
            "replayed. Send the request again.",
            updated_at=clock().isoformat(),
        )
        with contextlib.suppress(Exception):
            store.save(failed)
        raise
    return request


def run_bulk_replay(
    store: ReplayRequestStore,
    archive: DeadLetterArchive,
    resender: MessageResender,
    seeder: SessionSeeder,
    request_id: str,
    *,
    page_size: int = 100,
    clock: Clock = _now,
) -> ReplayRequest:
    """Replay every failed session that matches; progress is saved after each page.

    Running it again (a redelivered queue message) sends nothing twice, since each session is
    replayed under the key ``bulk:<request id>``, and reports what one run would have: it
    starts over from page 1, where the sessions this request replayed are no longer listed as
    failed, so it counts those afresh (``sent``) and recounts the rest instead of adding to
    the totals the earlier run saved."""
    request = store.get(request_id)
    if request.status in ("completed", "failed"):
        return request
    key = f"bulk:{request_id}"
    # "running": an earlier run started and may have replayed sessions before it died.
    sent = _replayed_under(archive, request, key, page_size) if request.status == "running" else 0
    request = replace(
        request,
        status="running",
        found=sent,
        sent=sent,
        failed=0,
        errors=(),
        updated_at=clock().isoformat(),
    )
    store.save(request)
    for items in _matching_pages(archive, request, FAILED, page_size):
        found, sent, failed, errors = request.found, request.sent, request.failed, request.errors
        for summary in items:
            found += 1
            try:
                # Counted even when nothing is sent now: an earlier run of this request sent
                # it, then died before the session's summary said so.
                replay_session(archive, resender, seeder, summary.session_id, key, clock=clock)
                sent += 1
            except (ReplayIncomplete, AlreadyReplayed, SessionNotArchived) as error:
                failed += 1
                if len(errors) < MAX_RECORDED_ERRORS:
                    errors = (*errors, {"session_id": summary.session_id, "error": str(error)})
        request = replace(
            request,
            found=found,
            sent=sent,
            failed=failed,
            errors=errors,
            updated_at=clock().isoformat(),
        )
        store.save(request)
    request = replace(request, status="completed", updated_at=clock().isoformat())
    store.save(request)
    return request


def _replayed_under(
    archive: DeadLetterArchive, request: ReplayRequest, key: str, page_size: int
) -> int:
    """How many matching sessions an earlier run of the request replayed (whole)."""
    return sum(
        1
        for items in _matching_pages(archive, request, REPLAYED, page_size)
        for summary in items
        if summary.replay_key == key
    )


def _matching_pages(
    archive: DeadLetterArchive, request: ReplayRequest, status: str, page_size: int
) -> Iterator[Sequence[FailedSession]]:
    """The summaries the request's filter selects, with ``status``, a page at a time."""
    continuation: str | None = None
    while True:
        page = archive.list_summaries(
            queue=request.queue,
            task=request.task,
            reason=request.reason,
            status=status,
            page_size=page_size,
            continuation=continuation,
        )
        yield page.items
        continuation = page.continuation
        if not continuation:
            return


def mark_bulk_replay_failed(
    store: ReplayRequestStore, request_id: str, failure: str, *, clock: Clock = _now
) -> ReplayRequest:
    """The request's queue message is going to the poison queue: say so in its status."""
    request = replace(
        store.get(request_id), status="failed", failure=failure, updated_at=clock().isoformat()
    )
    store.save(request)
    return request
