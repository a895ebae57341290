"""Resolve a failed session without a replay: an operator decides it needs none (a duplicate
order, a row put right by hand) and says why. The resolution claims the session's summary as
a replay does, so of any number of replays and resolutions of one session only the first
happens; a resolved session leaves the default list, stays searchable (status "resolved"),
and no later replay, single or bulk, sends it."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..domain.archive import RESOLVE, ReplayClaim, claimed_elsewhere
from ..domain.audit import Action, AuditEntry, required_note
from ..domain.errors import InvalidInput
from ..domain.idempotency import fingerprint
from .clock import Clock, utc_now
from .idempotency import IdempotentRequests
from .operator_ports import AuditTrail
from .ports import DeadLetterArchive


@dataclass(frozen=True)
class Resolution:
    session_id: str
    resolved_at: str  # when the first request with the key claimed the session
    key: str
    who: str
    note: str


def resolve_session(
    archive: DeadLetterArchive,
    audit: AuditTrail,
    session_id: str,
    key: str,
    *,
    who: str,
    note: str | None,
    role: str = "",
    action: Action = "resolve",
    requests: IdempotentRequests | None = None,
    clock: Clock = utc_now,
) -> Resolution:
    """Mark the session resolved under ``key`` and record who and why (``note`` is required)
    in its audit trail. Repeating it with the same key changes nothing and answers the same;
    a session another key replayed or resolved is refused with ``AlreadyReplayed`` or
    ``AlreadyResolved``. Raises ``SessionNotArchived`` and ``InvalidInput`` ("note") too.

    With ``requests``, the Idempotency-Key rules of the replay API apply as well (a repeat
    while the first is in flight is refused; the key with another note, too)."""
    why = required_note(note)
    if not key.strip():
        raise InvalidInput("Idempotency-Key", "is required: any unique string, e.g. a UUID")

    def resolve() -> Resolution:
        claim = archive.claim_replay(
            session_id, ReplayClaim(key, "", clock().isoformat(), action=RESOLVE)
        )
        if not claim.holds(key, RESOLVE):
            raise claimed_elsewhere(session_id, claim)
        # Recorded by every run with the key: once only (the entry is keyed by it), and
        # never missing after a run that died between the claim and the record.
        audit.record(AuditEntry(session_id, action, who, claim.claimed_at, why, key=key, role=role))
        return Resolution(session_id, claim.claimed_at, key, who, why)

    if requests is None:
        return resolve()
    stored = requests.run(f"resolve:{session_id}", key, fingerprint(why), lambda: asdict(resolve()))
    return Resolution(**stored)
