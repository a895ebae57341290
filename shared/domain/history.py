"""What became of a replay: the new session it sent the failed session's work in, when, by
whom, and whether that work completed, is still running, or failed again."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Outcome = Literal["in progress", "completed", "failed again"]


@dataclass(frozen=True)
class ReplayOutcome:
    """One replay: of ``session_id``, as ``new_session_id``, when, by whom, and how it went."""

    session_id: str
    new_session_id: str
    at: str
    by: str
    key: str
    outcome: Outcome
    reason: str | None = None  # why it failed again
