"""What an operator does to a failed session, from the console or the API, each action audited:
who, when, why. A replay goes through ``replay_session`` and so obeys its exactly-once rules:
the request's key (the console's action id, or the API's Idempotency-Key) claims the session,
so the same request sent twice replays once, and another request's replay of the session is
refused naming the first."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict

from ..domain.audit import NOTE_MAX, Action, AuditEntry, MessageEdit, required_note
from ..domain.edits import checked_edit
from ..domain.errors import InvalidInput
from ..domain.pipelines import Pipelines
from .clock import Clock, utc_now
from .idempotency import IdempotentRequests
from .operator_ports import AuditTrail
from .ports import DeadLetterArchive, MessageResender, SessionSeeder
from .replay import ReplayResult, replay_session

AUDITED_EDITS_MAX_CHARS = 30_000  # what one audit row holds (a Table property: 32K characters)


def console_key(action_id: str) -> str:
    """The Idempotency-Key of a console action: the id its form was rendered with."""
    if not 8 <= len(action_id) <= 64 or not action_id.replace("-", "").isalnum():
        raise InvalidInput("action_id", "is not an id this console rendered: reload the page")
    return f"console:{action_id}"


def replay_for_operator(
    archive: DeadLetterArchive,
    resender: MessageResender,
    seeder: SessionSeeder,
    audit: AuditTrail,
    session_id: str,
    *,
    key: str,
    who: str,
    pipelines: Pipelines,
    note: str = "",
    role: str = "",
    force: bool = False,
    requests: IdempotentRequests | None = None,
    clock: Clock = utc_now,
) -> ReplayResult:
    """Replay the session under ``key`` and audit it once (a repeat of the same request
    sends nothing and records nothing new); ``force`` as for ``replay_session``. Raises what
    ``replay_session`` raises."""
    note = note.strip()
    if len(note) > NOTE_MAX:
        raise InvalidInput("note", f"must be at most {NOTE_MAX} characters, got {len(note)}")
    result = replay_session(
        archive,
        resender,
        seeder,
        session_id,
        key,
        pipelines=pipelines,
        force=force,
        requests=requests,
    )
    _audit(audit, result, "replay", (who, role), note, key, (), clock)
    return result


def edit_and_replay(
    archive: DeadLetterArchive,
    resender: MessageResender,
    seeder: SessionSeeder,
    audit: AuditTrail,
    session_id: str,
    edited: Mapping[str, str],
    *,
    key: str,
    who: str,
    note: str | None,
    pipelines: Pipelines,
    role: str = "",
    requests: IdempotentRequests | None = None,
    clock: Clock = utc_now,
) -> ReplayResult:
    """Replay the session with the messages in ``edited`` (row key -> the new body as text)
    replaced, each checked like the original (``checked_edit``, with the check its pipeline
    declares in ``pipelines``); the archive keeps the
    originals; the audit keeps who, when, why (``note`` is required) and each JSON diff.
    Raises ``InvalidInput`` naming the message and field before anything is sent, and what
    ``replay_session`` raises."""
    why = required_note(note)
    rows = {row.row_key: row for row in archive.list_session(session_id)}
    bodies: dict[str, bytes] = {}
    edits: list[MessageEdit] = []
    for row_key, text in edited.items():
        row = rows.get(row_key)
        if row is None:
            raise InvalidInput(f"messages[{row_key}]", "is not a message of this session")
        body, changes = checked_edit(
            row.body,
            text,
            field=f"messages[{row_key}].body",
            payload_checks=pipelines.payload_check,
        )
        if changes:
            bodies[row_key] = body
            edits.append(MessageEdit(row_key, row.step, row.task, changes))
    if not edits:
        raise InvalidInput("messages", "change at least one message, or replay it as it is")
    size = len(json.dumps([asdict(edit) for edit in edits], default=str))
    if size > AUDITED_EDITS_MAX_CHARS:
        raise InvalidInput(
            "messages",
            f"change at most {AUDITED_EDITS_MAX_CHARS} characters of JSON in all (the audit "
            f"keeps each change), got {size}",
        )
    result = replay_session(
        archive,
        resender,
        seeder,
        session_id,
        key,
        pipelines=pipelines,
        bodies=bodies,
        requests=requests,
    )
    _audit(audit, result, "edit-and-replay", (who, role), why, key, tuple(edits), clock)
    return result


def _audit(
    audit: AuditTrail,
    result: ReplayResult,
    action: Action,
    by: tuple[str, str],
    note: str,
    key: str,
    edits: tuple[MessageEdit, ...],
    clock: Clock,
) -> None:
    """Recorded by every run of the request: kept once (keyed by ``key``), and never missing
    after a run that died between sending and recording."""
    entry = AuditEntry(
        session_id=result.session_id,
        action=action,
        who=by[0],
        at=clock().isoformat(),
        note=note,
        new_session_id=result.new_session_id,
        edits=edits,
        key=key,
        role=by[1],
    )
    audit.record(entry)
