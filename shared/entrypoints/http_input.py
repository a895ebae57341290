"""What a request carries, read with limits before anything else happens: route values,
query parameters, the Idempotency-Key header and JSON bodies. Each refusal is an
``InvalidInput`` (``TooLarge`` for a body) naming the field and its limit.

Bodies: the Functions host reads a request's body whole before the worker sees it (up to its
own limit of 100 MB); a function cannot stop that. What the app can do, it does: a body whose
``Content-Length`` is over the route's limit is refused with 413 before the body is touched,
and a body without one (chunked) is measured before it is decoded or parsed.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from typing import Any

import azure.functions as func

from ..domain.errors import InvalidInput, TooLarge, UnsupportedMediaType
from ..domain.idempotency import HEADER, idempotency_key
from ..domain.json_documents import check_text, parse_json_object
from ..domain.replays import ReplayRequestNotFound
from ..domain.time_windows import time_window

MAX_ID_LENGTH = 256  # session ids (Service Bus: 128), job ids, request ids
MAX_FILTER_LENGTH = 1024  # queue, task, reason filters
MAX_TOKEN_LENGTH = 4096  # continuation tokens

_ENCODED_SLASH = re.compile("%2F", re.IGNORECASE)


def route_value(req: func.HttpRequest, name: str, *, max_length: int = MAX_ID_LENGTH) -> str:
    """The host decodes route values as ASP.NET Core does: every escape but ``%2F``, so that an
    encoded '/' cannot change the route. Session and job ids may hold '/', so it is decoded
    here; decoding everything again would turn an id's literal ``%41`` into ``A``."""
    value = _ENCODED_SLASH.sub("/", req.route_params[name])
    _bounded(name, value, max_length)
    return value


def request_id_of(value: str) -> str:
    """Request ids are UUIDs; anything else ('#', '?', ...) is no key the table could hold,
    so no request: raises ``ReplayRequestNotFound``."""
    try:
        uuid.UUID(value)
    except ValueError:
        raise ReplayRequestNotFound(value) from None
    return value


def query_text(
    req: func.HttpRequest, name: str, *, max_length: int = MAX_FILTER_LENGTH
) -> str | None:
    """The parameter, or None when absent or empty."""
    value = req.params.get(name) or None
    if value is not None:
        _bounded(name, value, max_length)
    return value


def query_int(req: func.HttpRequest, name: str, *, default: int, low: int, high: int) -> int:
    raw = req.params.get(name)
    if raw is None:
        return default
    rule = f"must be a whole number from {low} to {high}"
    # Bounded in digits before conversion: a 5,000-digit parameter is refused, not converted.
    if not raw.isascii() or not raw.isdigit() or len(raw) > len(str(high)):
        raise InvalidInput(name, rule)
    value = int(raw)
    if not low <= value <= high:
        raise InvalidInput(name, rule)
    return value


def query_window(
    req: func.HttpRequest, names: tuple[str, str] = ("failed_from", "failed_to")
) -> tuple[str | None, str | None]:
    """A time window's two ends from the query (ISO 8601 with an offset; either may be
    left out), as ``shared.domain.time_windows.time_window`` reads them."""
    return time_window(
        query_text(req, names[0], max_length=64),
        query_text(req, names[1], max_length=64),
        names=names,
    )


def query_flag(req: func.HttpRequest, name: str) -> bool:
    raw = (req.params.get(name) or "").lower()
    if raw in ("", "0", "false", "no"):
        return False
    if raw in ("1", "true", "yes"):
        return True
    raise InvalidInput(name, "must be true or false")


def query_choice(req: func.HttpRequest, name: str, choices: Sequence[str], default: str) -> str:
    value = req.params.get(name) or default
    if value not in choices:
        raise InvalidInput(name, f"must be one of {', '.join(choices)}")
    return value


def header_key(req: func.HttpRequest) -> str | None:
    """The Idempotency-Key header, or None (``shared.domain.idempotency.idempotency_key``)."""
    return idempotency_key(req.headers.get(HEADER), required=False)


def required_header_key(req: func.HttpRequest) -> str:
    """The Idempotency-Key header; refused (400) when missing."""
    key = idempotency_key(req.headers.get(HEADER), required=True)
    if key is None:  # idempotency_key raised already; this keeps the type exact
        raise InvalidInput(HEADER, "is required")
    return key


JSON = "application/json"


def json_body(req: func.HttpRequest, *, max_bytes: int, example: str) -> dict[str, Any]:
    """The body's JSON object (``shared.domain.json_documents``), within ``max_bytes``, sent
    as ``application/json`` (``UnsupportedMediaType``, 415, otherwise: checked before
    anything else, so a form or a text body starts nothing)."""
    check_json_content_type(req)
    check_body_size(req, max_bytes=max_bytes)
    return parse_json_object(req.get_body(), example=example)


def check_json_content_type(req: func.HttpRequest) -> None:
    """``Content-Type: application/json`` (its parameters, such as ``charset=utf-8``, aside),
    else ``UnsupportedMediaType`` naming what was sent and what is expected."""
    sent = req.headers.get("Content-Type") or ""
    media_type = sent.split(";", 1)[0].strip().lower()
    if media_type != JSON:
        shown = f"is {sent.strip()[:100]!r}" if sent.strip() else "is missing"
        raise UnsupportedMediaType(
            "Content-Type", f"{shown}; send the body as {JSON} (Content-Type: {JSON})"
        )


def check_body_size(req: func.HttpRequest, *, max_bytes: int) -> None:
    """Refuse a body over ``max_bytes``: by its Content-Length when it has one, without
    touching the body; else by its length."""
    declared = req.headers.get("Content-Length")
    if declared is not None:
        if not declared.isascii() or not declared.isdigit() or len(declared) > 19:
            raise InvalidInput("Content-Length", "must be a whole number of bytes")
        if int(declared) > max_bytes:
            raise TooLarge("body", f"is {int(declared)} bytes; send at most {max_bytes} bytes")
    size = len(req.get_body())
    if size > max_bytes:
        raise TooLarge("body", f"is {size} bytes; send at most {max_bytes} bytes")


def _bounded(name: str, value: str, max_length: int) -> None:
    check_text(name, value)
    if len(value) > max_length:
        raise InvalidInput(name, f"must be at most {max_length} characters, got {len(value)}")
