"""The JSON documents the HTTP API answers with, built from the services' results."""

from __future__ import annotations

import base64
import json
from dataclasses import asdict
from typing import Any
from urllib.parse import quote

import azure.functions as func

from ..domain.archive import ArchivedMessage, FailedSession
from ..domain.order_status import OrderStatus
from ..domain.pipelines import Pipelines
from ..domain.replays import ReplayRequest
from ..service_layer.jobs import StartedJob
from ..service_layer.replay import ReplayResult
from .http import url_for


def session_view(summary: FailedSession) -> dict[str, Any]:
    view = asdict(summary)
    view["context"] = dict(summary.context)
    return view


def row_view(row: ArchivedMessage) -> dict[str, Any]:
    """An archived message; ``row_key`` is what an edit-and-replay names it by."""
    view = {"row_key": row.row_key, **asdict(row)}
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


def request_view(request: ReplayRequest) -> dict[str, Any]:
    view = asdict(request)
    view["errors"] = list(request.errors)
    view["taken_sessions"] = list(request.taken_sessions)
    return view


def order_view(req: func.HttpRequest, order: StartedJob) -> dict[str, Any]:
    return {
        "job_id": order.job_id,
        "session_id": order.session_id,
        "tasks": list(order.tasks),
        "status": "accepted",
        "status_url": order_url(req, order.job_id),
    }


def order_status_view(status: OrderStatus) -> dict[str, Any]:
    view = asdict(status)
    if status.receipt_email is not None:  # its first-sent time as ISO 8601, like the others
        view["receipt_email"]["first_sent"] = status.receipt_email.first_sent.isoformat()
    return view


def replay_view(
    req: func.HttpRequest, result: ReplayResult, pipelines: Pipelines
) -> dict[str, Any]:
    return {
        "session_id": result.session_id,
        "new_session_id": result.new_session_id,
        "queue": result.queue,
        "sent": result.sent,
        "status": "accepted",
        "status_url": replay_status_url(req, result, pipelines),
        "failed_session_url": failed_session_url(req, result.session_id),
    }


def replay_status_url(req: func.HttpRequest, result: ReplayResult, pipelines: Pipelines) -> str:
    """Where the replayed work can be followed: the job whose messages the new session
    carries, at its pipeline's declared route (the failed session's view when the archive
    names no job, or the pipeline declares no route)."""
    pipeline = pipelines.find(result.pipeline)
    if result.job_id is None or pipeline is None or pipeline.route is None:
        return failed_session_url(req, result.session_id)
    return job_url(req, pipeline.route, result.job_id)


def job_url(req: func.HttpRequest, route: str, job_id: str) -> str:
    """``GET /api/<route>/{job_id}``: where a job of the pipeline declared at ``route`` stands."""
    return url_for(req, f"{route}/{_segment(job_id)}")


def order_url(req: func.HttpRequest, job_id: str) -> str:
    return job_url(req, "orders", job_id)


def failed_session_url(req: func.HttpRequest, session_id: str) -> str:
    return url_for(req, f"failed-sessions/{_segment(session_id)}")


def replay_request_url(req: func.HttpRequest, request_id: str) -> str:
    return url_for(req, f"replays/{request_id}")


def _segment(value: str) -> str:
    return quote(value, safe="")
