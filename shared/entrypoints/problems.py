"""HTTP responses of every function: JSON documents and RFC 9457 problem documents."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import azure.functions as func

PROBLEM_JSON = "application/problem+json"


def json_response(
    status: int, document: Any, *, headers: Mapping[str, str] | None = None
) -> func.HttpResponse:
    return func.HttpResponse(
        json.dumps(document, default=str),
        status_code=status,
        mimetype="application/json",
        headers=dict(headers or {}),
    )


def problem(
    status: int,
    title: str,
    detail: str,
    *,
    type_: str = "about:blank",
    headers: Mapping[str, str] | None = None,
    **extensions: Any,
) -> func.HttpResponse:
    """A problem document whose ``detail`` tells the caller what to fix; ``extensions`` add
    members such as ``errors=[{"field": ..., "problem": ...}]``."""
    document = {"type": type_, "title": title, "status": status, "detail": detail, **extensions}
    return func.HttpResponse(
        json.dumps(document, default=str),
        status_code=status,
        mimetype=PROBLEM_JSON,
        # Also as a header, so the type is on the response object itself, not only in the
        # mimetype the worker turns into a header.
        headers={"Content-Type": PROBLEM_JSON, **(headers or {})},
    )
