"""An operator's edit of an archived message before it is replayed: checked like the message
it replaces, so a replay sends nothing the pipeline would not have accepted in the first
place. Only the payload may change: the job, pipeline, task, step and is_last keep the
session's order."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from .audit import Change, json_diff
from .envelope import ROUTING_FIELDS, parse_task_message
from .errors import InvalidInput, MalformedMessage

EDITED_BODY_MAX_BYTES = 256 * 1024  # a Service Bus standard-tier message

# A pipeline's payload check by the pipeline's name (None: no check is declared for it); a
# check raises ``InvalidInput`` naming the field.
PayloadChecks = Callable[[str], Callable[[Mapping[str, Any]], object] | None]


def checked_edit(
    original: bytes, edited: str, *, field: str, payload_checks: PayloadChecks
) -> tuple[bytes, tuple[Change, ...]]:
    """The body to send instead of ``original`` and what changed (a JSON diff). Raises
    ``InvalidInput`` naming ``field`` (and the part of the body) when the edit is not JSON,
    not a task message, changes more than the payload, or holds a payload its pipeline's
    check (``payload_checks``) refuses."""
    encoded = edited.encode("utf-8", errors="surrogatepass")
    if len(encoded) > EDITED_BODY_MAX_BYTES:
        raise InvalidInput(field, f"must be at most {EDITED_BODY_MAX_BYTES} bytes")
    try:
        document = json.loads(edited, object_pairs_hook=_unique_keys(field))
        message = parse_task_message(edited)
    except MalformedMessage as error:
        raise InvalidInput(f"{field}.{error.field}", error.problem) from error
    except ValueError as error:
        raise InvalidInput(field, f"must be JSON ({error})") from error
    before = _json_or_none(original)
    if isinstance(before, dict):
        for name in ROUTING_FIELDS:
            if document.get(name) != before.get(name):
                raise InvalidInput(
                    f"{field}.{name}",
                    f"must stay {before.get(name)!r}: only the payload may change",
                )
    check = payload_checks(message.pipeline)
    try:
        if check is not None:
            check(message.payload)
    except InvalidInput as error:
        raise InvalidInput(f"{field}.payload.{error.field}", error.problem) from error
    if before is None:  # an unreadable body is replaced whole; the audit keeps its text
        changes: tuple[Change, ...] = (
            Change("replace", "", old=original.decode("utf-8", errors="replace"), new=document),
        )
    else:
        changes = tuple(json_diff(before, document))
    return json.dumps(document, ensure_ascii=False).encode(), changes


def _json_or_none(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


def _unique_keys(field: str) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for key, value in items:
            if key in seen:
                raise InvalidInput(field, f"names {key!r} twice: each key once")
            seen[key] = value
        return seen

    return pairs
