"""Bindings of the dead-letter archive and replay: the archive timer, the failed-sessions
HTTP API and the bulk replay queue trigger."""

from __future__ import annotations

import base64
import json
import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import azure.functions as func

from ..bootstrap import container
from ..domain.archive import (
    AlreadyReplayed,
    ArchivedMessage,
    FailedSession,
    ReplayIncomplete,
    SessionNotArchived,
)
from ..domain.errors import InvalidInput
from ..domain.replays import ReplayRequest, ReplayRequestNotFound
from ..service_layer.dead_letters import archive_dead_letters as archive_service
from ..service_layer.failed_sessions import MAX_PAGE_SIZE, group_failed_sessions
from ..service_layer.replay import (
    mark_bulk_replay_failed,
    replay_session,
    request_bulk_replay,
    run_bulk_replay,
)
from .problems import json_response, problem

logger = logging.getLogger(__name__)
bp = func.Blueprint()


@bp.timer_trigger(arg_name="timer", schedule="%DLQ_ARCHIVE_SCHEDULE%", use_monitor=True)
def archive_dead_letters(timer: func.TimerRequest) -> None:
    """Move dead letters of every session queue into Table Storage, bounded per run."""
    c = container()
    if timer.past_due:
        logger.info("The archive run is late; it catches up now.")
    report = archive_service(
        c.dead_letter_source,
        c.archive,
        queues=c.session_queues,
        max_messages=c.settings.archive_max_messages,
        max_seconds=c.settings.archive_max_seconds,
    )
    logger.info(
        "archive_dead_letters moved %d dead letter(s) (%s) in %d transaction(s)%s",
        report.total,
        ", ".join(f"{queue}={count}" for queue, count in report.moved.items()),
        report.transactions,
        "; more are waiting for the next run" if report.stopped_early else "",
    )


@bp.route(route="failed-sessions", methods=["GET"], auth_level=func.AuthLevel.FUNCTION)
def list_failed_sessions(req: func.HttpRequest) -> func.HttpResponse:
    """Failed sessions, filtered by queue, task, reason and status (default "failed", "any");
    paged with an opaque continuation token."""
    try:
        page_size = _page_size(req.params.get("page_size"))
        status = req.params.get("status", "failed")
        page = container().archive.list_summaries(
            queue=req.params.get("queue"),
            task=req.params.get("task"),
            reason=req.params.get("reason"),
            status=None if status == "any" else status,
            page_size=page_size,
            continuation=req.params.get("continuation"),
        )
    except (InvalidInput, ValueError) as error:
        return _bad_request(error)
    return json_response(
        200,
        {
            "items": [_session_view(summary) for summary in page.items],
            "continuation": page.continuation,
        },
    )


@bp.route(route="failed-session-groups", methods=["GET"], auth_level=func.AuthLevel.FUNCTION)
def failed_session_groups(req: func.HttpRequest) -> func.HttpResponse:
    """Counts of failed sessions by (queue, failed task, reason), largest first."""
    status = req.params.get("status", "failed")
    groups = group_failed_sessions(
        container().archive,
        status=None if status == "any" else status,
        queue=req.params.get("queue"),
    )
    return json_response(200, {"groups": [asdict(group) for group in groups]})


@bp.route(route="failed-sessions/{session_id}", methods=["GET"], auth_level=func.AuthLevel.FUNCTION)
def get_failed_session(req: func.HttpRequest) -> func.HttpResponse:
    session_id = _session_id(req)
    archive = container().archive
    try:
        summary = archive.get_summary(session_id)
    except SessionNotArchived as error:
        return problem(404, "Unknown session", str(error))
    rows = archive.list_session(session_id)
    return json_response(
        200, {**_session_view(summary), "messages": [_row_view(row) for row in rows]}
    )


@bp.route(
    route="failed-sessions/{session_id}/replay",
    methods=["POST"],
    auth_level=func.AuthLevel.FUNCTION,
)
def replay_failed_session(req: func.HttpRequest) -> func.HttpResponse:
    """Send the session's archived messages again, in order, under a new session id."""
    session_id = _session_id(req)
    key = req.headers.get("Idempotency-Key")
    if not key:
        return problem(
            400,
            "Idempotency-Key is required",
            "Send an Idempotency-Key header (any unique string, e.g. a UUID) so that a "
            "repeated request replays nothing twice.",
        )
    force = req.params.get("force", "false").lower() in ("1", "true", "yes")
    c = container()
    try:
        result = replay_session(
            c.archive, c.resender, c.session_seeder, session_id, key, force=force
        )
    except SessionNotArchived as error:
        return problem(404, "Unknown session", str(error))
    except (ReplayIncomplete, AlreadyReplayed) as error:
        return problem(409, "The session cannot be replayed now", str(error))
    except InvalidInput as error:
        return _bad_request(error)
    return json_response(
        202,
        {
            "session_id": result.session_id,
            "new_session_id": result.new_session_id,
            "queue": result.queue,
            "sent": result.sent,
            "status": "accepted",
        },
    )


@bp.route(route="replays", methods=["POST"], auth_level=func.AuthLevel.FUNCTION)
def request_replay(req: func.HttpRequest) -> func.HttpResponse:
    """Replay every failed session that failed at a task and/or with a reason, in the
    background (through a storage queue)."""
    try:
        document = req.get_json()
    except ValueError:
        return problem(400, "The body is not JSON", 'Send {"task": "...", "reason": "..."}.')
    if not isinstance(document, dict):
        return problem(400, "The body must be a JSON object", 'Send {"task": "...", ...}.')
    c = container()
    try:
        request = request_bulk_replay(
            c.replay_requests,
            c.replay_queue,
            queue_name=_optional_text(document, "queue"),
            task=_optional_text(document, "task"),
            reason=_optional_text(document, "reason"),
        )
    except InvalidInput as error:
        return _bad_request(error)
    status_url = _url(req, f"replays/{request.request_id}")
    return json_response(
        202,
        {**_request_view(request), "status_url": status_url},
        headers={"Location": status_url},
    )


@bp.route(route="replays/{request_id}", methods=["GET"], auth_level=func.AuthLevel.FUNCTION)
def get_replay(req: func.HttpRequest) -> func.HttpResponse:
    try:
        request = container().replay_requests.get(req.route_params["request_id"])
    except ReplayRequestNotFound as error:
        return problem(404, "Unknown replay request", str(error))
    return json_response(200, _request_view(request))


@bp.queue_trigger(
    arg_name="msg", queue_name="%REPLAY_QUEUE_NAME%", connection="AzureWebJobsStorage"
)
def replay_requests(msg: func.QueueMessage) -> None:
    """Perform a bulk replay. A request that keeps failing goes to the poison queue, and its
    status says why before it does."""
    try:
        request_id = json.loads(msg.get_body())["request_id"]
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(
            f"Queue message {msg.id} is not a replay request ({error!r}); it goes to the poison "
            "queue untouched."
        ) from error
    c = container()
    try:
        run_bulk_replay(c.replay_requests, c.archive, c.resender, c.session_seeder, request_id)
    except ReplayRequestNotFound:
        logger.error("Replay request %s does not exist; the message is dropped.", request_id)
    except Exception as error:
        if (msg.dequeue_count or 1) >= _max_dequeue_count():
            mark_bulk_replay_failed(
                c.replay_requests,
                request_id,
                f"Gave up after {msg.dequeue_count} attempts: {type(error).__name__}: {error}. "
                "The request is in the poison queue; fix the cause and request the replay again.",
            )
        raise


# -- helpers -------------------------------------------------------------------------------------


def _session_id(req: func.HttpRequest) -> str:
    # Session ids may hold '/', '#', '?': clients percent-encode them, and a host may leave
    # %2F encoded in the route value.
    return unquote(req.route_params["session_id"])


def _page_size(raw: str | None) -> int:
    if raw is None:
        return 50
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_PAGE_SIZE:
        raise InvalidInput("page_size", f"must be a whole number from 1 to {MAX_PAGE_SIZE}")
    return int(raw)


def _optional_text(document: dict[str, Any], name: str) -> str | None:
    value = document.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(name, "must be a non-empty string")
    return value.strip()


def _bad_request(error: Exception) -> func.HttpResponse:
    field = getattr(error, "field", None)
    return problem(
        400,
        "The request is not valid",
        str(error),
        errors=[{"field": field, "problem": getattr(error, "problem", str(error))}]
        if field
        else None,
    )


def _url(req: func.HttpRequest, path: str) -> str:
    base = req.url.split("/api/", 1)[0]
    return f"{base}/api/{path}"


def _session_view(summary: FailedSession) -> dict[str, Any]:
    view = asdict(summary)
    view["context"] = dict(summary.context)
    return view


def _row_view(row: ArchivedMessage) -> dict[str, Any]:
    view = asdict(row)
    body = view.pop("body")
    try:
        view["body"] = json.loads(body)
        view["body_encoding"] = "json"
    except (UnicodeDecodeError, ValueError):
        view["body"] = base64.b64encode(body).decode()
        view["body_encoding"] = "base64"
    view["body_size"] = len(body)
    view["application_properties"] = dict(row.application_properties)
    return view


def _request_view(request: ReplayRequest) -> dict[str, Any]:
    view = asdict(request)
    view["errors"] = list(request.errors)
    return view


_MAX_DEQUEUE: int | None = None


def _max_dequeue_count() -> int:
    """host.json's extensions.queues.maxDequeueCount (5 when unset, as in the host)."""
    global _MAX_DEQUEUE
    if _MAX_DEQUEUE is None:
        path = Path(__file__).resolve().parents[2] / "host.json"
        try:
            queues = json.loads(path.read_text())["extensions"]["queues"]
            _MAX_DEQUEUE = int(queues.get("maxDequeueCount", 5))
        except (OSError, KeyError, ValueError):
            _MAX_DEQUEUE = 5
    return _MAX_DEQUEUE
