"""What an operator takes away: the failed sessions a filter chooses, and the audit trail of a
time window, whole (the bindings write them as CSV). An export is bounded: past
``EXPORT_MAX_ROWS`` it is refused naming the filter to narrow, never cut short in silence."""

from __future__ import annotations

from ..domain.archive import FailedSession, SummaryFilter
from ..domain.audit import AuditEntry
from ..domain.errors import InvalidInput
from .failed_sessions import every_session
from .operator_ports import AuditTrail
from .ports import DeadLetterArchive

EXPORT_MAX_ROWS = 10_000


def export_failed_sessions(
    archive: DeadLetterArchive, selected: SummaryFilter, *, up_to: int = EXPORT_MAX_ROWS
) -> list[FailedSession]:
    """Every session ``selected`` chooses, by when it failed. Raises ``InvalidInput``
    ("failed_from") when there are more than ``up_to``."""
    found: list[FailedSession] = []
    for summary in every_session(archive, selected):
        if len(found) == up_to:
            raise InvalidInput(
                "failed_from",
                f"and failed_to choose more than {up_to} sessions: export a narrower window "
                "(or filter by queue, task, reason or status)",
            )
        found.append(summary)
    return sorted(found, key=lambda s: (s.failed_at or "", s.session_id))


def audit_entries(
    trail: AuditTrail, start: str | None, end: str | None, *, up_to: int = EXPORT_MAX_ROWS
) -> list[AuditEntry]:
    """Every entry recorded in ``[start, end)``, oldest first. Raises ``InvalidInput``
    ("from") when there are more than ``up_to``."""
    entries = trail.between(start, end, up_to=up_to + 1)
    if len(entries) > up_to:
        raise InvalidInput(
            "from", f"and to hold more than {up_to} audit entries: ask for a narrower window"
        )
    return sorted(entries, key=lambda e: (e.at, e.session_id, e.action))
