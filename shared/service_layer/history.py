"""A failed session's history: what operators did to it (the audit trail) and the replays it
led to, each with its outcome. A replay that failed again is a failed session of its own,
which may be replayed in turn: the history follows that chain, so a session whose replay
failed again is flagged, and the replay that finally completed is shown."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..domain.archive import RESOLVE, ReplayClaim, SessionNotArchived, pipeline_of
from ..domain.audit import AuditEntry
from ..domain.history import Outcome, ReplayOutcome
from ..domain.order_status import COMPLETED, FAILED
from ..domain.pipelines import PRODUCT_IMPORT, PURCHASE_TASKS
from ..domain.reasons import SESSION_FAILED
from .observers import ROW_FAILED
from .operator_ports import AuditTrail
from .ports import DeadLetterArchive, ImportProgress, OrderProgress

MAX_CHAIN = 20  # replays of replays followed, at most


@dataclass(frozen=True)
class SessionHistory:
    session_id: str
    status: str
    entries: list[AuditEntry]
    replays: list[ReplayOutcome]
    resolved: ReplayClaim | None = None
    failed_again: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "failed_again", any(r.outcome == "failed again" for r in self.replays)
        )


@dataclass(frozen=True)
class Progress:
    """Where the outcomes of replayed work are recorded."""

    orders: OrderProgress
    imports: ImportProgress


def session_history(
    archive: DeadLetterArchive, audit: AuditTrail, progress: Progress, session_id: str
) -> SessionHistory:
    """The session's audit trail and its chain of replays. Raises ``SessionNotArchived``."""
    summary = archive.get_summary(session_id)
    claim = summary.claim
    return SessionHistory(
        session_id=session_id,
        status=summary.status,
        entries=audit.history(session_id),
        replays=replay_chain(archive, audit, progress, session_id),
        resolved=claim if claim is not None and claim.action == RESOLVE else None,
    )


def replay_chain(
    archive: DeadLetterArchive, audit: AuditTrail, progress: Progress, session_id: str
) -> list[ReplayOutcome]:
    """The replay of ``session_id``, then the replay of that replay if it failed again, and so
    on; empty when the session was never replayed (or was never archived)."""
    chain: list[ReplayOutcome] = []
    current = session_id
    while len(chain) < MAX_CHAIN:
        try:
            claim = archive.get_summary(current).claim
        except SessionNotArchived:
            return chain
        if claim is None or claim.action == RESOLVE or not claim.new_session_id:
            return chain
        outcome, reason = _outcome(archive, progress, current, claim.new_session_id)
        chain.append(
            ReplayOutcome(
                session_id=current,
                new_session_id=claim.new_session_id,
                at=claim.claimed_at,
                by=_who(audit.history(current), claim),
                key=claim.key,
                outcome=outcome,
                reason=reason,
            )
        )
        if outcome != "failed again":
            return chain
        current = claim.new_session_id
    return chain


def _outcome(
    archive: DeadLetterArchive, progress: Progress, session_id: str, new_session_id: str
) -> tuple[Outcome, str | None]:
    try:
        again = archive.get_summary(new_session_id)
    except SessionNotArchived:
        pass
    else:
        return "failed again", again.reason
    rows = archive.list_session(session_id)
    job_id = next((row.job_id for row in rows if row.job_id), None)
    if job_id is None:
        return "in progress", None
    if pipeline_of(rows) == PRODUCT_IMPORT:
        # A replayed row's outcome overwrites its original's (recorded under the original
        # session): once none of them is failed, the replay imported them all.
        counts = progress.imports.counts(job_id, session_id=session_id)
        return ("in progress" if counts.get(ROW_FAILED) else "completed"), None
    record = progress.orders.get(job_id)
    steps = record.steps if record else ()
    mine = [s for s in steps if s.session_id == new_session_id]
    failed = [s for s in mine if s.status == FAILED and s.reason != SESSION_FAILED]
    if failed:
        return "failed again", failed[0].reason
    done = {s.step for s in steps if s.status == COMPLETED}
    if len(PURCHASE_TASKS) in done and mine:
        return "completed", None
    return "in progress", None


def _who(entries: list[AuditEntry], claim: ReplayClaim) -> str:
    """The operator the audit names for the replay, else the request's key."""
    for entry in entries:
        if entry.new_session_id == claim.new_session_id:
            return entry.who
    if claim.key.startswith("bulk:"):
        return f"bulk replay {claim.key.removeprefix('bulk:')}"
    return f"the API (Idempotency-Key {claim.key})"
