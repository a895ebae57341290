"""How a session ended, as the processor records it when the session's last message is
settled: the same for every pipeline, so the replay history, the status of a job and the
console know whether work completed or failed without a store of the pipeline's own."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

SessionStatus = Literal["completed", "failed"]
COMPLETED: SessionStatus = "completed"
FAILED: SessionStatus = "failed"

JobStatus = Literal["accepted", "completed", "failed"]


@dataclass(frozen=True)
class SessionOutcome:
    """``failed``: a task of the session failed (under stop-on-failure the rest did not run;
    under continue-on-failure the others ran); ``reason``: the first failure's reason."""

    job_id: str
    session_id: str
    pipeline: str
    status: SessionStatus
    at: str
    reason: str | None = None


def job_status(outcomes: Sequence[SessionOutcome]) -> JobStatus:
    """A job's status from the outcomes of its sessions (the first, then its replays): the
    latest to end decides; none yet, the job is accepted (its sessions still run)."""
    if not outcomes:
        return "accepted"
    return max(outcomes, key=lambda o: o.at).status
