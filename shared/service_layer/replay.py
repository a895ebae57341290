"""Replay a failed session: send its archived messages again, in the original order, under a
new session id seeded with the failed session's context; and bulk replays of every session
that failed the same way, run from a storage queue so no HTTP request waits on them."""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from ..domain.archive import (
    REPLAYED,
    AlreadyReplayed,
    ReplayIncomplete,
    SessionNotArchived,
    replay_session_id,
    summarize,
)
from ..domain.errors import InvalidInput
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
    clock: Clock = _now,
) -> ReplayResult:
    """Raises ``SessionNotArchived``, ``ReplayIncomplete`` or ``AlreadyReplayed``."""
    if not idempotency_key.strip():
        raise InvalidInput("Idempotency-Key", "is required: any unique string, e.g. a UUID")
    rows = archive.list_session(session_id)
    if not rows:
        raise SessionNotArchived(session_id)
    if not force and not any(row.is_last for row in rows):
        raise ReplayIncomplete(session_id, len(rows))
    elsewhere = [r for r in rows if r.status == REPLAYED and r.replay_key != idempotency_key]
    if elsewhere:
        raise AlreadyReplayed(session_id, elsewhere[0].replayed_session_id)

    queue = rows[0].queue
    new_session_id = replay_session_id(session_id, idempotency_key)
    pending = [row for row in rows if row.status != REPLAYED]
    if not pending:
        return ReplayResult(session_id, new_session_id, queue, sent=0)
    record = archive.get_record(session_id)
    if len(pending) == len(rows):
        # Start the new session where the failed one stopped, knowing what it knew.
        seed = SessionState(
            next_step=rows[0].step or 1,
            context=dict(record.context) if record else {},
        )
        seeder.seed(queue, new_session_id, seed.to_bytes())
    resender.resend(
        queue,
        new_session_id,
        [
            OutgoingMessage(
                body=row.body,
                # Deterministic: a repeated request is dropped by duplicate detection.
                message_id=f"{new_session_id}:{row.row_key}",
                content_type=row.content_type,
                application_properties={**row.application_properties, "replay_of": session_id},
            )
            for row in pending
        ],
    )
    at = clock().isoformat()
    archive.mark_replayed(
        [row.replayed(session_id=new_session_id, key=idempotency_key, at=at) for row in pending]
    )
    archive.save_summary(summarize(session_id, archive.list_session(session_id), record))
    logger.info(
        "Replayed %d message(s) of session %s as %s on %s",
        len(pending),
        session_id,
        new_session_id,
        queue,
    )
    return ReplayResult(session_id, new_session_id, queue, sent=len(pending))


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
    """Replay every failed session that matches; progress is saved after each page. Running
    it again (a redelivered queue message) sends nothing twice: each session is replayed under
    the key ``bulk:<request id>``."""
    request = store.get(request_id)
    if request.status in ("completed", "failed"):
        return request
    request = replace(request, status="running", updated_at=clock().isoformat())
    store.save(request)
    continuation: str | None = None
    while True:
        page = archive.list_summaries(
            queue=request.queue,
            task=request.task,
            reason=request.reason,
            status="failed",
            page_size=page_size,
            continuation=continuation,
        )
        found, sent, failed, errors = request.found, request.sent, request.failed, request.errors
        for summary in page.items:
            found += 1
            try:
                replay_session(
                    archive,
                    resender,
                    seeder,
                    summary.session_id,
                    f"bulk:{request_id}",
                    clock=clock,
                )
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
        continuation = page.continuation
        if not continuation:
            break
    request = replace(request, status="completed", updated_at=clock().isoformat())
    store.save(request)
    return request


def mark_bulk_replay_failed(
    store: ReplayRequestStore, request_id: str, failure: str, *, clock: Clock = _now
) -> ReplayRequest:
    """The request's queue message is going to the poison queue: say so in its status."""
    request = replace(
        store.get(request_id), status="failed", failure=failure, updated_at=clock().isoformat()
    )
    store.save(request)
    return request
