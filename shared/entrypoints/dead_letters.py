"""Bindings of the dead-letter archive and replay: the archive timer, the failed-sessions
HTTP API and the bulk replay queue trigger."""

from __future__ import annotations

import base64
import functools
import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any
from urllib.parse import quote

import azure.functions as func
from azure.core.exceptions import AzureError

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
from .routes import route_value

logger = logging.getLogger(__name__)
bp = func.Blueprint()

RETRY_AFTER_SECONDS = 30
STATUSES = ("failed", "replayed", "any")
REPLAY_FIELDS = ("queue", "task", "reason")

HttpFunction = Callable[[func.HttpRequest], func.HttpResponse]


def _outages_as_problems(function: HttpFunction) -> HttpFunction:
    """Storage or Service Bus out of reach is a 503 problem document, not the host's bare 500
    with a stack trace in the log only."""

    @functools.wraps(function)
    def wrapper(req: func.HttpRequest) -> func.HttpResponse:
        try:
            return function(req)
        except AzureError as error:
            logger.warning(
                "%s could not reach storage: %s", function.__name__, type(error).__name__
            )
            return problem(
                503,
                "A backing service is unavailable",
                "Table Storage, the replay queue or Service Bus could not be reached. Retry in "
                f"{RETRY_AFTER_SECONDS} seconds (with the same Idempotency-Key for a replay).",
                headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
            )

    return wrapper


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
@_outages_as_problems
def list_failed_sessions(req: func.HttpRequest) -> func.HttpResponse:
    """Failed sessions, filtered by queue, task, reason and status ("failed" by default,
    "replayed", "any"); paged with an opaque continuation token."""
    try:
        page_size = _page_size(req.params.get("page_size"))
        page = container().archive.list_summaries(
            queue=req.params.get("queue") or None,
            task=req.params.get("task") or None,
            reason=req.params.get("reason") or None,
            status=_status(req),
            page_size=page_size,
            continuation=req.params.get("continuation") or None,
        )
    except InvalidInput as error:
        return _bad_request(error)
    except (ValueError, TypeError, KeyError) as error:
        # Only the continuation token comes from the caller without a check of its own.
        logger.info("Refused a continuation token: %s", error)
        return _bad_request(InvalidInput("continuation", "is not a token this API returned"))
    return json_response(
        200,
        {
            "items": [_session_view(summary) for summary in page.items],
            "continuation": page.continuation,
        },
    )


@bp.route(route="failed-session-groups", methods=["GET"], auth_level=func.AuthLevel.FUNCTION)
@_outages_as_problems
def failed_session_groups(req: func.HttpRequest) -> func.HttpResponse:
    """Counts of failed sessions by (queue, failed task, reason), largest first."""
    try:
        status = _status(req)
    except InvalidInput as error:
        return _bad_request(error)
    groups = group_failed_sessions(
        container().archive, status=status, queue=req.params.get("queue") or None
    )
    return json_response(200, {"groups": [asdict(group) for group in groups]})


@bp.route(route="failed-sessions/{session_id}", methods=["GET"], auth_level=func.AuthLevel.FUNCTION)
@_outages_as_problems
def get_failed_session(req: func.HttpRequest) -> func.HttpResponse:
    """One failed session and its archived messages in send order; 404 when none are archived."""
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
@_outages_as_problems
def replay_failed_session(req: func.HttpRequest) -> func.HttpResponse:
    """Send the session's archived messages again, in order, under a new session id derived
    from the Idempotency-Key: 202 with that id; a repeat with the same key sends nothing new.
    404 when the session is unknown, 409 when incomplete or replayed under another key."""
    session_id = _session_id(req)
    key = (req.headers.get("Idempotency-Key") or "").strip()
    if not key:
        return problem(
            400,
            "Idempotency-Key is required",
            "Send an Idempotency-Key header (any unique string, e.g. a UUID) so that a "
            "repeated request replays nothing twice.",
            errors=[{"field": "Idempotency-Key", "problem": "is required"}],
        )
    try:
        force = _flag(req.params.get("force"), "force")
    except InvalidInput as error:
        return _bad_request(error)
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
    # The failed session's own view says "replayed" and names the new session once it is done.
    location = _url(req, f"failed-sessions/{quote(session_id, safe='')}")
    return json_response(
        202,
        {
            "session_id": result.session_id,
            "new_session_id": result.new_session_id,
            "queue": result.queue,
            "sent": result.sent,
            "status": "accepted",
            "status_url": location,
        },
        headers={"Location": location},
    )


@bp.route(route="replays", methods=["POST"], auth_level=func.AuthLevel.FUNCTION)
@_outages_as_problems
def request_replay(req: func.HttpRequest) -> func.HttpResponse:
    """Replay every failed session that failed at a task and/or with a reason, in the
    background (through a storage queue): 202 with the status URL of the request."""
    try:
        document = json.loads(req.get_body())
    except (ValueError, UnicodeDecodeError) as error:
        return problem(
            400,
            "The body is not JSON",
            f'Send a JSON object such as {{"task": "ProcessPayment", "reason": "..."}}: {error}.',
        )
    if not isinstance(document, dict):
        return problem(
            400, "The body must be a JSON object", 'Send {"task": "...", "reason": "..."}.'
        )
    unknown = sorted(set(document) - set(REPLAY_FIELDS))
    if unknown:
        return _bad_request(
            InvalidInput(unknown[0], f"is not a field; use {', '.join(REPLAY_FIELDS)}")
        )
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
@_outages_as_problems
def get_replay(req: func.HttpRequest) -> func.HttpResponse:
    """Progress of a bulk replay: status, sessions found, sent and failed (with the first
    errors); ``failure`` says why when it ended in the poison queue."""
    request_id = route_value(req, "request_id")
    try:
        # Request ids are UUIDs; anything else ('#', '?', ...) is no key the table could hold.
        uuid.UUID(request_id)
        request = container().replay_requests.get(request_id)
    except ValueError:
        return problem(404, "Unknown replay request", str(ReplayRequestNotFound(request_id)))
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
        attempt = msg.dequeue_count or 1
        if attempt >= _max_dequeue_count():
            try:
                mark_bulk_replay_failed(
                    c.replay_requests,
                    request_id,
                    f"Gave up after {attempt} attempts: {type(error).__name__}: {error}. The "
                    "request is in the poison queue; fix the cause and request the replay again.",
                )
            except Exception:
                logger.exception("Could not mark replay request %s failed", request_id)
        else:
            logger.warning(
                "Replay request %s failed on attempt %d; the queue delivers it again.",
                request_id,
                attempt,
            )
        raise


# -- helpers -------------------------------------------------------------------------------------


def _session_id(req: func.HttpRequest) -> str:
    return route_value(req, "session_id")


def _status(req: func.HttpRequest) -> str | None:
    status = req.params.get("status") or "failed"
    if status not in STATUSES:
        raise InvalidInput("status", f"must be one of {', '.join(STATUSES)}")
    return None if status == "any" else status


def _flag(raw: str | None, name: str) -> bool:
    if raw is None or raw.lower() in ("", "0", "false", "no"):
        return False
    if raw.lower() in ("1", "true", "yes"):
        return True
    raise InvalidInput(name, "must be true or false")


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


def _bad_request(error: InvalidInput) -> func.HttpResponse:
    return problem(
        400,
        "The request is not valid",
        str(error),
        errors=[{"field": error.field, "problem": error.problem}],
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
