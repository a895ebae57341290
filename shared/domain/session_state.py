"""The JSON session state kept by Service Bus for each session.

Service Bus returns no state until a task sets one; the last message of a session sets it
back to ``None`` so that finished sessions cost no storage. The document is versioned so a
later release can read what an earlier one wrote.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from .errors import PipelineError

STATE_VERSION = 1
RUNNING: Literal["running"] = "running"
FAILED: Literal["failed"] = "failed"
CORRUPT_SESSION_STATE = "CorruptSessionState"


class CorruptSessionState(PipelineError):
    """The stored state cannot be read. The processor treats it as a failed session."""


@dataclass(frozen=True)
class Failure:
    task: str
    step: int | None
    reason: str
    description: str
    at: str  # ISO 8601, UTC


@dataclass(frozen=True)
class SessionState:
    status: Literal["running", "failed"] = RUNNING
    next_step: int = 1
    completed: tuple[str, ...] = ()
    context: dict[str, Any] = field(default_factory=dict)
    failure: Failure | None = None
    processed: int = 0
    failed: int = 0
    version: int = STATE_VERSION

    @property
    def is_failed(self) -> bool:
        return self.status == FAILED

    def after_success(self, task: str, step: int, outputs: dict[str, Any]) -> SessionState:
        return replace(
            self,
            next_step=max(self.next_step, step + 1),
            completed=(*self.completed, task),
            context={**self.context, **outputs},
            processed=self.processed + 1,
        )

    def after_skipped_failure(self, step: int) -> SessionState:
        """ContinueOnFailure: the message is dead-lettered and the session goes on."""
        return replace(
            self,
            next_step=max(self.next_step, step + 1),
            processed=self.processed + 1,
            failed=self.failed + 1,
        )

    def mark_failed(
        self, *, task: str, step: int | None, reason: str, description: str, at: datetime
    ) -> SessionState:
        """StopOnFailure: the first failure is kept; later ones do not overwrite it."""
        if self.failure is not None:
            return replace(self, status=FAILED, failed=self.failed + 1)
        failure = Failure(task, step, reason, description, at.isoformat())
        return replace(self, status=FAILED, failure=failure, failed=self.failed + 1)

    def to_bytes(self) -> bytes:
        document = asdict(self)
        document["completed"] = list(self.completed)
        return json.dumps(document, separators=(",", ":"), sort_keys=True).encode("utf-8")


def decode_session_state(raw: bytes | None) -> SessionState | None:
    """``None`` (or empty bytes) means no state yet. Raises ``CorruptSessionState``."""
    if not raw:
        return None
    try:
        document = json.loads(bytes(raw).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CorruptSessionState(f"session state is not JSON: {error}") from error
    if not isinstance(document, dict):
        raise CorruptSessionState("session state is not a JSON object")
    version = document.get("version")
    if version != STATE_VERSION:
        raise CorruptSessionState(f"unknown session state version {version!r}")
    try:
        failure = document.get("failure")
        state = SessionState(
            status=document["status"],
            next_step=document["next_step"],
            completed=tuple(document["completed"]),
            context=dict(document["context"]),
            failure=Failure(**failure) if failure is not None else None,
            processed=document.get("processed", 0),
            failed=document.get("failed", 0),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise CorruptSessionState(f"session state has a bad shape: {error!r}") from error
    if state.status not in (RUNNING, FAILED):
        raise CorruptSessionState(f"unknown session status {state.status!r}")
    if not isinstance(state.next_step, int) or isinstance(state.next_step, bool):
        raise CorruptSessionState("next_step is not an integer")
    if not all(isinstance(task, str) for task in state.completed):
        raise CorruptSessionState("completed holds something other than task names")
    return state
