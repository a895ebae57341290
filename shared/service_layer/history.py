"""A failed session's history: what operators did to it (the audit trail) and the replays it
led to, each with its outcome. A replay that failed again is a failed session of its own,
which may be replayed in turn: the history follows that chain, so a session whose replay
failed again is flagged, and the replay that finally completed is shown."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..domain.archive import RESOLVE, ReplayClaim, SessionNotArchived
from ..domain.audit import AuditEntry
from ..domain.history import Outcome, ReplayOutcome
from ..domain.session_outcomes import COMPLETED
from .operator_ports import AuditTrail
from .ports import DeadLetterArchive, SessionOutcomes

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
    """Where the outcomes of replayed work are recorded: how each session ended, as the
    processor records it for every pipeline."""

    sessions: SessionOutcomes


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
    rows = archive.list_session(session_id, bodies=False)
    job_id = next((row.job_id for row in rows if row.job_id), None)
    ended = progress.sessions.find(job_id, new_session_id) if job_id else None
    if ended is None:
        return "in progress", None
    if ended.status == COMPLETED:
        return "completed", None
    return "failed again", ended.reason


def _who(entries: list[AuditEntry], claim: ReplayClaim) -> str:
    """The operator the audit names for the replay, else the request's key."""
    for entry in entries:
        if entry.new_session_id == claim.new_session_id:
            return entry.who
    if claim.key.startswith("bulk:"):
        return f"bulk replay {claim.key.removeprefix('bulk:')}"
    return f"the API (Idempotency-Key {claim.key})"
