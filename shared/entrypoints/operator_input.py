"""What the operator API's routes read from a request, beyond ``http_input``: the filters that
choose failed sessions (queue, task, reason, status, the window of failure times) from the
query or a bulk action's body, a body's text fields, and the operator behind a request."""

from __future__ import annotations

from typing import Any

import azure.functions as func

from ..bootstrap.operator_desk import Ask
from ..domain.archive import STATUS_CHOICES, SummaryFilter, status_filter
from ..domain.confirmations import Selection
from ..domain.errors import InvalidInput
from ..domain.time_windows import TIME_EXAMPLE, time_window
from .http_input import MAX_FILTER_LENGTH, query_choice, query_text, query_window
from .roles import api_caller

FILTERS = ("queue", "task", "reason")
WINDOW = ("failed_from", "failed_to")


def status_of(req: func.HttpRequest) -> str | None:
    """The query's ``status`` ("failed" by default) as a ``SummaryFilter`` status."""
    return status_filter(query_choice(req, "status", STATUS_CHOICES, "failed"))


def selected(req: func.HttpRequest) -> SummaryFilter:
    """The query's filters: queue, task, reason, status and the window of failure times."""
    failed_from, failed_to = query_window(req)
    return SummaryFilter(
        **{name: query_text(req, name) for name in FILTERS},
        status=status_of(req),
        failed_from=failed_from,
        failed_to=failed_to,
    )


def selection(document: dict[str, Any], *, strict: bool = False) -> Selection:
    """A bulk action's selection from its body: queue, task and reason as text (``strict``: a
    field that is sent must not be blank), the window's ends as times (``time_window``)."""
    read = optional_text if strict else text_field
    window = {name: _window_end(document, name) for name in WINDOW}
    failed_from, failed_to = time_window(window["failed_from"], window["failed_to"])
    return Selection(
        **{name: read(document, name) for name in FILTERS},
        failed_from=failed_from,
        failed_to=failed_to,
    )


def ask_of(req: func.HttpRequest, key: str, note: str | None) -> Ask:
    """An operator's request from the API: the caller named by its key's digest, with its
    role (``api_caller``)."""
    who = api_caller(req)
    return Ask(key, who.name, note, who.role_label)


def only_fields(document: dict[str, Any], fields: tuple[str, ...]) -> None:
    unknown = sorted(set(document) - set(fields))
    if unknown:
        raise InvalidInput(unknown[0], f"is not a field; use {', '.join(fields)}")


def text_field(document: dict[str, Any], name: str) -> str | None:
    """A string field, trimmed; None when absent or blank."""
    value = document.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(name, "must be a string")
    if name in FILTERS and len(value) > MAX_FILTER_LENGTH:
        raise InvalidInput(name, f"must be at most {MAX_FILTER_LENGTH} characters")
    return value.strip() or None


def optional_text(document: dict[str, object], name: str) -> str | None:
    """A string field that, when sent, is not blank."""
    value = document.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(name, "must be a non-empty string")
    if len(value) > MAX_FILTER_LENGTH:
        raise InvalidInput(name, f"must be at most {MAX_FILTER_LENGTH} characters")
    return value.strip()


def _window_end(document: dict[str, Any], name: str) -> str | None:
    value = document.get(name)
    if value is not None and (not isinstance(value, str) or len(value) > 64):
        raise InvalidInput(name, f"must be an ISO 8601 time such as {TIME_EXAMPLE}")
    return value or None
