"""How a session ended, as the processor records it when the session's last message is
settled: the same for every pipeline, so the replay history, the status of a job and the
console know whether work completed or failed without a store of the pipeline's own."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import NotFound

# "accepted": sent by a start route, not ended yet (the processor overwrites it at the end)
SessionStatus = Literal["accepted", "completed", "failed"]
ACCEPTED: SessionStatus = "accepted"
COMPLETED: SessionStatus = "completed"
FAILED: SessionStatus = "failed"

JobStatus = SessionStatus


@dataclass(frozen=True)
class SessionOutcome:
    """``failed``: a task of the session failed (under stop-on-failure the rest did not run;
    under continue-on-failure the others ran); ``reason``: the first failure's reason.
    ``outputs``: what the session's tasks returned under the keys its pipeline ``shows``."""

    job_id: str
    session_id: str
    pipeline: str
    status: SessionStatus
    at: str
    reason: str | None = None
    outputs: Mapping[str, Any] = field(default_factory=dict)


def job_status(outcomes: Sequence[SessionOutcome]) -> JobStatus:
    """A job's status from the outcomes of its sessions (the first, then its replays): the
    latest recorded decides; none yet, the job is accepted (its sessions still run)."""
    if not outcomes:
        return ACCEPTED
    return max(outcomes, key=lambda o: o.at).status


class JobNotFound(NotFound):
    title = "Unknown job"

    def __init__(self, route: str, job_id: str) -> None:
        super().__init__(
            f"There is no job {job_id!r}. Use the job_id that POST /api/{route} returned."
        )
        self.job_id = job_id
