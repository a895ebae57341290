"""Bulk replays: every failed session that failed the same way, replayed (or resolved without a
replay) from a storage queue so no HTTP request waits on them. Each session is claimed as a
single replay or resolution claims it, so concurrent bulk requests (and single actions) never
act on a session twice: a session another request claimed first is counted as taken, not sent.
Each session acted on gets an entry in its audit trail (who asked, and why)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import replace

from ..domain.archive import (
    FAILED,
    REPLAYED,
    RESOLVED,
    AlreadyReplayed,
    AlreadyResolved,
    FailedSession,
    ReplayIncomplete,
    SessionNotArchived,
)
from ..domain.audit import AuditEntry
from ..domain.confirmations import Selection
from ..domain.errors import SessionLocked
from ..domain.pipelines import Pipelines
from ..domain.replays import BulkAction, ReplayRequest
from ..telemetry.operations import operation_span
from .clock import Clock, utc_now
from .operator_ports import AuditTrail, ReplayPorts
from .ports import (
    DeadLetterArchive,
    MessageResender,
    ReplayQueue,
    ReplayRequestStore,
    SessionSeeder,
)
from .replay import replay_session
from .resolve import resolve_session

MAX_RECORDED_ERRORS = 50


def request_bulk_replay(
    store: ReplayRequestStore,
    queue: ReplayQueue,
    selection: Selection,
    *,
    action: BulkAction = "replay",
    who: str = "",
    note: str = "",
    role: str = "",
    clock: Clock = utc_now,
) -> ReplayRequest:
    """Save the request (queued) for the sessions ``selection`` chooses by queue, task,
    reason and time window, and put it on the replay queue; ``who`` asked for it with
    ``role`` (each session's audit entry says so). A request that was saved but could not be queued
    is saved again as failed, then the error is raised."""
    selection.check_chooses()
    at = clock().isoformat()
    request = ReplayRequest(
        str(uuid.uuid4()),
        selection.queue,
        selection.task,
        selection.reason,
        created_at=at,
        updated_at=at,
        action=action,
        who=who,
        note=note,
        role=role,
        failed_from=selection.failed_from,
        failed_to=selection.failed_to,
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


def get_bulk_replay(store: ReplayRequestStore, request_id: str) -> ReplayRequest:
    """Raises ``ReplayRequestNotFound``."""
    return store.get(request_id)


def run_bulk_replay(
    store: ReplayRequestStore,
    archive: DeadLetterArchive,
    resender: MessageResender,
    seeder: SessionSeeder,
    request_id: str,
    *,
    audit: AuditTrail,
    pipelines: Pipelines,
    page_size: int = 100,
    clock: Clock = utc_now,
) -> ReplayRequest:
    """Replay (or resolve) every failed session that matches; progress is saved after each
    page. ``pipelines``: the declared ones (``replay_session``).

    Running it again (a redelivered queue message) sends nothing twice, since each session is
    replayed under the key ``bulk:<request id>``, and reports what one run would have: it
    starts over from page 1, where the sessions this request replayed are no longer listed as
    failed, so it counts those afresh (``sent``) and recounts the rest instead of adding to
    the totals the earlier run saved. ``taken`` counts the sessions of the pages it read that
    another request had claimed."""
    actors = ReplayPorts(archive, resender, seeder, audit)
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
        taken=0,
        taken_sessions=(),
        updated_at=clock().isoformat(),
    )
    store.save(request)
    # One span for the run ("bulk replay" or "bulk resolve"); each session's replay is a span
    # in it, linked to that session.
    with operation_span(
        f"bulk {request.action}", attributes={"replay.request_id": request_id}
    ) as note:
        for items in _matching_pages(archive, request, FAILED, page_size):
            for summary in items:
                request = _act_on_one(actors, pipelines, request, summary, key, clock)
            store.save(replace(request, updated_at=clock().isoformat()))
        note(**{"replay.sessions_sent": request.sent, "replay.sessions_failed": request.failed})
    request = replace(request, status="completed", updated_at=clock().isoformat())
    store.save(request)
    return request


def _act_on_one(
    actors: ReplayPorts,
    pipelines: Pipelines,
    request: ReplayRequest,
    summary: FailedSession,
    key: str,
    clock: Clock,
) -> ReplayRequest:
    found = request.found + 1
    session_id = summary.session_id
    who = request.who or f"bulk {request.action} {request.request_id}"
    try:
        # Counted even when nothing is sent now: an earlier run of this request sent it, then
        # died before the session's summary said so.
        if request.action == "resolve":
            resolve_session(
                actors.archive,
                actors.audit,
                session_id,
                key,
                who=who,
                note=request.note or f"bulk resolve {request.request_id}",
                role=request.role,
                action="bulk-resolve",
                clock=clock,
            )
        else:
            result = replay_session(
                actors.archive,
                actors.resender,
                actors.seeder,
                session_id,
                key,
                pipelines=pipelines,
                clock=clock,
            )
            actors.audit.record(
                AuditEntry(
                    session_id,
                    "bulk-replay",
                    who,
                    clock().isoformat(),
                    request.note,
                    new_session_id=result.new_session_id,
                    key=key,
                    role=request.role,
                )
            )
    except (AlreadyReplayed, AlreadyResolved) as error:
        taken = request.taken_sessions
        if len(taken) < MAX_RECORDED_ERRORS:
            taken = (
                *taken,
                {
                    "session_id": session_id,
                    "new_session_id": error.claim.new_session_id,
                    "idempotency_key": error.claim.key,
                    "action": error.claim.action,
                },
            )
        return replace(request, found=found, taken=request.taken + 1, taken_sessions=taken)
    except (ReplayIncomplete, SessionNotArchived, SessionLocked) as error:
        errors = request.errors
        if len(errors) < MAX_RECORDED_ERRORS:
            errors = (*errors, {"session_id": summary.session_id, "error": str(error)})
        return replace(request, found=found, failed=request.failed + 1, errors=errors)
    return replace(request, found=found, sent=request.sent + 1)


def _replayed_under(
    archive: DeadLetterArchive, request: ReplayRequest, key: str, page_size: int
) -> int:
    """How many matching sessions an earlier run of the request replayed (whole) or
    resolved."""
    if request.action == "resolve":
        return sum(
            1
            for items in _matching_pages(archive, request, RESOLVED, page_size)
            for summary in items
            if summary.claim is not None and summary.claim.key == key
        )
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
            request.selects(status), page_size=page_size, continuation=continuation
        )
        yield page.items
        continuation = page.continuation
        if not continuation:
            return


def mark_bulk_replay_failed(
    store: ReplayRequestStore, request_id: str, failure: str, *, clock: Clock = utc_now
) -> ReplayRequest:
    """The request's queue message is going to the poison queue: say so in its status."""
    request = replace(
        store.get(request_id), status="failed", failure=failure, updated_at=clock().isoformat()
    )
    store.save(request)
    return request
