"""What an operator did to a failed session, kept for whoever asks later: who, when, why (a
note is required) and, for an edited replay, what changed in each message (a JSON diff)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import InvalidInput

NOTE_MAX = 2000

Action = Literal[
    "replay", "edit-and-replay", "resolve", "bulk-replay", "bulk-resolve", "pause", "resume"
]


@dataclass(frozen=True)
class Change:
    """One difference between two JSON documents, as an RFC 6902 operation with the old value
    kept: ``path`` is a JSON Pointer (RFC 6901)."""

    op: Literal["add", "remove", "replace"]
    path: str
    old: Any = None
    new: Any = None


@dataclass(frozen=True)
class MessageEdit:
    """The changes made to one archived message (by its row key) before it was replayed."""

    row_key: str
    step: int | None
    task: str | None
    changes: tuple[Change, ...]


@dataclass(frozen=True)
class AuditEntry:
    """``key`` names the request that did it (its Idempotency-Key, or the bulk request's): an
    entry is recorded once per (session, action, key), so a request repeated after a crash
    records nothing twice. ``who`` is the person or key, ``role`` the role they acted with
    (``shared.domain.roles``; empty in entries recorded before roles)."""

    session_id: str
    action: Action
    who: str
    at: str
    note: str
    new_session_id: str | None = None
    edits: tuple[MessageEdit, ...] = field(default_factory=tuple)
    key: str = ""
    role: str = ""


def json_diff(before: Any, after: Any, path: str = "") -> list[Change]:
    """The changes that turn ``before`` into ``after``: objects are compared key by key, lists
    of equal length item by item; anything else that differs is replaced whole."""
    if isinstance(before, dict) and isinstance(after, dict):
        changes: list[Change] = []
        for key in before:
            child = f"{path}/{_escape(str(key))}"
            if key not in after:
                changes.append(Change("remove", child, old=before[key]))
            else:
                changes.extend(json_diff(before[key], after[key], child))
        changes.extend(
            Change("add", f"{path}/{_escape(str(key))}", new=after[key])
            for key in after
            if key not in before
        )
        return changes
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [
            c
            for i, pair in enumerate(zip(before, after, strict=True))
            for c in json_diff(*pair, f"{path}/{i}")
        ]
    if type(before) is type(after) and before == after:
        return []
    return [Change("replace", path, old=before, new=after)]


def required_note(note: str | None) -> str:
    """The operator's reason, trimmed; raises ``InvalidInput`` ("note") when it is missing,
    too long or not text a person wrote."""
    text = (note or "").strip()
    if not text:
        raise InvalidInput("note", "is required: say why, for whoever reads the audit trail")
    if len(text) > NOTE_MAX:
        raise InvalidInput("note", f"must be at most {NOTE_MAX} characters, got {len(text)}")
    if any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        raise InvalidInput("note", "must be valid Unicode text (it holds a lone surrogate)")
    return text


def key_holder(key: str) -> str:
    """How the audit trail names whoever used a function key, without writing the key down."""
    return f"function key {hashlib.sha256(key.encode()).hexdigest()[:8]}"


def changed_messages(edits: Sequence[MessageEdit]) -> tuple[MessageEdit, ...]:
    """Only the edits that change something."""
    return tuple(edit for edit in edits if edit.changes)


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")
