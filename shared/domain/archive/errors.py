"""What the archive refuses: an unknown session, an incomplete one, one that another request
replayed or resolved first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import Conflict, NotFound
from .claims import RESOLVE, ReplayClaim


class SessionNotArchived(NotFound):
    title = "Unknown session"

    def __init__(self, session_id: str) -> None:
        super().__init__(f"No dead letters are archived for session {session_id!r}.")
        self.session_id = session_id


class ReplayIncomplete(Conflict):
    title = "The session cannot be replayed now"

    def __init__(self, session_id: str, count: int) -> None:
        super().__init__(
            f"The archive holds {count} message(s) of session {session_id!r} but not its last "
            "one yet: the rest may still be on their way to the dead-letter queue. Wait for the "
            "next archive run, or replay with force=true to send what is there."
        )
        self.session_id = session_id


def claimed_elsewhere(session_id: str, claim: ReplayClaim) -> ClaimedElsewhere:
    """The refusal of a request that found ``claim`` holding the session."""
    if claim.action == RESOLVE:
        return AlreadyResolved(session_id, claim)
    return AlreadyReplayed(session_id, claim)


class ClaimedElsewhere(Conflict):
    """Another request replayed or resolved the session first; ``claim`` is its claim."""

    template = ""  # the detail, formatted with the session id and the claim

    def __init__(self, session_id: str, claim: ReplayClaim) -> None:
        super().__init__(self.template.format(session_id=session_id, claim=claim))
        self.session_id = session_id
        self.claim = claim


class AlreadyResolved(ClaimedElsewhere):
    """An operator resolved the session without a replay: it is never replayed."""

    title = "The session was resolved"
    template = (
        "Session {session_id!r} was resolved without a replay at {claim.claimed_at} ({claim.key!r})"
        ": it is not replayed, nor resolved again. Its history says who resolved it and why."
    )

    @property
    def members(self) -> Mapping[str, Any]:
        return {"resolution": {"idempotency_key": self.claim.key, "at": self.claim.claimed_at}}


class AlreadyReplayed(ClaimedElsewhere):
    """Another replay claimed the session first: it is replayed (or being replayed) as
    ``claim.new_session_id`` under another Idempotency-Key."""

    title = "The session cannot be replayed now"
    template = (
        "Session {session_id!r} was already replayed as {claim.new_session_id!r} under another"
        " Idempotency-Key ({claim.key!r}, claimed at {claim.claimed_at}). Follow that replay;"
        " replay its session instead if it failed again."
    )

    @property
    def replayed_session_id(self) -> str:
        return self.claim.new_session_id

    @property
    def members(self) -> Mapping[str, Any]:
        return {
            "replay": {
                "new_session_id": self.claim.new_session_id,
                "idempotency_key": self.claim.key,
                "claimed_at": self.claim.claimed_at,
            }
        }
