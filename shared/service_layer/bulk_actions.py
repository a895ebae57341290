"""Bulk actions on failed sessions in two steps: ``preview_bulk_action`` counts the sessions and
groups a bulk replay (or resolution) would touch and issues a confirmation token;
``confirm_bulk_action`` redeems it (once), checks that the selection still holds exactly those
sessions, and only then queues the request, whose run claims each session like a single replay
or resolution does and records who asked for it and why in each session's history."""

from __future__ import annotations

from collections import Counter

from ..domain.archive import FAILED
from ..domain.audit import required_note
from ..domain.confirmations import GroupCount, Preview, Selection, check, digest_of, expiry
from ..domain.errors import InvalidInput
from ..domain.replays import BulkAction, ReplayRequest
from .bulk_replay import request_bulk_replay
from .clock import Clock, utc_now
from .failed_sessions import every_session
from .operator_ports import Confirmations
from .ports import DeadLetterArchive, ReplayQueue, ReplayRequestStore

ACTIONS: tuple[BulkAction, ...] = ("replay", "resolve")


def bulk_action(value: object) -> BulkAction:
    """``value`` as a bulk action; raises ``InvalidInput`` ("action")."""
    for action in ACTIONS:
        if value == action:
            return action
    raise InvalidInput("action", f"must be one of {', '.join(ACTIONS)}")


def preview_bulk_action(
    archive: DeadLetterArchive,
    confirmations: Confirmations,
    action: BulkAction,
    selection: Selection,
    *,
    clock: Clock = utc_now,
) -> Preview:
    """How many failed sessions of which groups a bulk ``action`` of ``selection`` would
    touch, and the token that confirms exactly those. Raises ``InvalidInput`` for a selection
    without task and reason, or one that matches nothing."""
    selection.check_chooses()
    if selection.fingerprint:
        raise InvalidInput("fingerprint", "a bulk action chooses by queue, task and reason")
    sessions = _selected(archive, selection)
    if not sessions:
        raise InvalidInput("reason", f"matches no failed session: nothing to {action}")
    counts = Counter((queue, task, reason) for _, queue, task, reason in sessions)
    confirmation = confirmations.issue(
        action, selection, len(sessions), digest_of(s[0] for s in sessions), expiry(clock())
    )
    groups = tuple(
        GroupCount(queue, task, reason, n)
        for (queue, task, reason), n in sorted(counts.items(), key=lambda i: -i[1])
    )
    return Preview(confirmation, groups)


def confirm_bulk_action(
    archive: DeadLetterArchive,
    confirmations: Confirmations,
    requests: ReplayRequestStore,
    queue: ReplayQueue,
    action: BulkAction,
    token: str,
    *,
    who: str,
    note: str | None,
    role: str = "",
    clock: Clock = utc_now,
) -> ReplayRequest:
    """Queue the bulk ``action`` the token confirms. Raises ``InvalidInput`` ("note") before
    the token is used, and ``ConfirmationRefused`` when the token is unknown, used, expired,
    for the other action, or the selection no longer holds the sessions the preview
    counted."""
    why = required_note(note)
    confirmation = confirmations.redeem(token)
    sessions = _selected(archive, confirmation.selection)
    check(confirmation, action, (s[0] for s in sessions), clock())
    return request_bulk_replay(
        requests,
        queue,
        confirmation.selection,
        action=action,
        who=who,
        note=why,
        role=role,
        clock=clock,
    )


def _selected(
    archive: DeadLetterArchive, selection: Selection
) -> list[tuple[str, str, str | None, str]]:
    """(session id, queue, failed task, reason) of every failed session the selection holds."""
    return [
        (s.session_id, s.queue, s.failed_task, s.reason)
        for s in every_session(archive, selection.summaries(FAILED))
    ]
