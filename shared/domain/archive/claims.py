"""Replay claims: the one action a failed session gets, replay or resolve, claimed by the
first request under its idempotency key."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal

from .messages import RESOLVED, Status

REPLAY: Literal["replay"] = "replay"
RESOLVE: Literal["resolve"] = "resolve"

# Fixed namespace: the same (session, idempotency key) always yields the same new session id.
_REPLAY_NAMESPACE = uuid.UUID("0b8a4f1e-34c5-4f8e-bb1c-9c6c1d6f7e21")


def replay_session_id(session_id: str, idempotency_key: str) -> str:
    """Deterministic: repeating a replay request under the same key reuses the session."""
    name = "\n".join((session_id, idempotency_key))
    return f"replay-{uuid.uuid5(_REPLAY_NAMESPACE, name)}"


@dataclass(frozen=True)
class ReplayClaim:
    """The one action a failed session gets: the first request to claim the session's summary
    (under its idempotency key) either replays it, as ``new_session_id``, or resolves it
    without a replay (``action`` "resolve", no new session); every other request is refused."""

    key: str
    new_session_id: str  # "" for a resolution
    claimed_at: str
    action: Literal["replay", "resolve"] = REPLAY

    def holds(self, key: str, action: str) -> bool:
        """Whether this claim is the one a request with ``key`` for ``action`` made."""
        return self.key == key and self.action == action


def status_with(status: Status, claim: ReplayClaim | None) -> Status:
    """A session whose claim is a resolution is resolved, whatever its rows say (an archive
    run may still be adding the rest of its dead letters)."""
    return RESOLVED if claim is not None and claim.action == RESOLVE else status
