"""The CSV exports (RFC 4180, UTF-8, a header row): failed sessions and audit entries, and the
response that carries them. A cell that a spreadsheet would read as a formula (it starts with
``=``, ``+``, ``-``, ``@``, a tab or a carriage return) is written with a leading ``'``, as
OWASP's CSV injection guidance has it: a dead letter's description is whatever the failing code
or the sender put there."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict

import azure.functions as func

from ..domain.archive import FailedSession
from ..domain.audit import AuditEntry

SESSION_COLUMNS = (
    "session_id",
    "job_id",
    "queue",
    "status",
    "failed_task",
    "failed_step",
    "reason",
    "description",
    "failed_at",
    "message_count",
    "replayed_session_id",
    "replayed_at",
    "claim_action",
    "claimed_by_key",
    "trace_id",
)
AUDIT_COLUMNS = ("at", "session_id", "action", "who", "role", "note", "new_session_id", "edits")
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def sessions_csv(sessions: Iterable[FailedSession]) -> str:
    return _csv(
        SESSION_COLUMNS,
        (
            (
                s.session_id,
                s.job_id,
                s.queue,
                s.status,
                s.failed_task,
                s.failed_step,
                s.reason,
                s.description,
                s.failed_at,
                s.message_count,
                s.replayed_session_id,
                s.replayed_at,
                s.claim.action if s.claim else None,
                s.claim.key if s.claim else None,
                s.trace_id,
            )
            for s in sessions
        ),
    )


def audit_csv(entries: Iterable[AuditEntry]) -> str:
    """One row per entry; ``edits`` holds an edit's JSON diff as JSON."""
    return _csv(
        AUDIT_COLUMNS,
        (
            (
                e.at,
                e.session_id,
                e.action,
                e.who,
                e.role,
                e.note,
                e.new_session_id,
                json.dumps([asdict(edit) for edit in e.edits], default=str) if e.edits else "",
            )
            for e in entries
        ),
    )


def csv_response(text: str, filename: str) -> func.HttpResponse:
    return func.HttpResponse(
        text.encode("utf-8"),
        status_code=200,
        headers={
            "Content-Type": "text/csv; charset=utf-8",
            "Content-Disposition": f'attachment; filename="{filename}"',
            "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-store",
        },
    )


def cell(value: object) -> str:
    """A value as a CSV cell, never a formula."""
    text = "" if value is None else str(value)
    return f"'{text}" if text.startswith(_FORMULA_STARTS) else text


def _csv(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(columns)
    writer.writerows([cell(value) for value in row] for row in rows)
    return out.getvalue()
