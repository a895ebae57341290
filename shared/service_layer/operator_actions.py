"""What an operator does to a failed session from the console, each action audited: who,
when, why. A replay goes through ``replay_session`` and so obeys its exactly-once rules: the
console's action id is the Idempotency-Key, so a form sent twice replays once, and a second
operator's replay of the same session is refused naming the first."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from ..domain.audit import NOTE_MAX, AuditEntry, MessageEdit, required_note
from ..domain.edits import checked_edit
from ..domain.errors import InvalidInput
from .operator_ports import AuditTrail
from .ports import DeadLetterArchive, MessageResender, SessionSeeder
from .replay import ReplayResult, replay_session

Clock = Callable[[], datetime]


def _now() -> datetime:
    return datetime.now(UTC)


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
    action_id: str,
    who: str,
    note: str = "",
    clock: Clock = _now,
) -> ReplayResult:
    """Replay the session under the action's key and audit it once (a repeat of the same
    action sends nothing and records nothing). Raises what ``replay_session`` raises."""
    note = note.strip()
    if len(note) > NOTE_MAX:
        raise InvalidInput("note", f"must be at most {NOTE_MAX} characters, got {len(note)}")
    result = replay_session(archive, resender, seeder, session_id, console_key(action_id))
    if result.sent:
        audit.record(
            AuditEntry(
                session_id=session_id,
                action="replay",
                who=who,
                at=clock().isoformat(),
                note=note,
                new_session_id=result.new_session_id,
            )
        )
    return result


def history(audit: AuditTrail, session_id: str) -> list[AuditEntry]:
    return audit.history(session_id)


def edit_and_replay(
    archive: DeadLetterArchive,
    resender: MessageResender,
    seeder: SessionSeeder,
    audit: AuditTrail,
    session_id: str,
    edited: Mapping[str, str],
    *,
    action_id: str,
    who: str,
    note: str | None,
    clock: Clock = _now,
) -> ReplayResult:
    """Replay the session with the messages in ``edited`` (row key -> the new body as text)
    replaced, each checked like the original (``checked_edit``); the archive keeps the
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
        body, changes = checked_edit(row.body, text, field=f"messages[{row_key}].body")
        if changes:
            bodies[row_key] = body
            edits.append(MessageEdit(row_key, row.step, row.task, changes))
    if not edits:
        raise InvalidInput("messages", "change at least one message, or replay it as it is")
    result = replay_session(
        archive, resender, seeder, session_id, console_key(action_id), bodies=bodies
    )
    if result.sent:
        audit.record(
            AuditEntry(
                session_id=session_id,
                action="edit-and-replay",
                who=who,
                at=clock().isoformat(),
                note=why,
                new_session_id=result.new_session_id,
                edits=tuple(edits),
            )
        )
    return result
