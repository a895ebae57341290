"""The JSON session state kept by Service Bus for each session.

Service Bus returns no state until a task sets one; the last message of a session sets it
back to ``None`` so that finished sessions cost no storage. The document is versioned so a
later release can read what an earlier one wrote.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from .errors import PipelineError

STATE_VERSION = 1
RUNNING: Literal["running"] = "running"
FAILED: Literal["failed"] = "failed"


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
class Attempts:
    """The step being retried after transient failures, how many of its attempts failed (the
    app's own count, written before each wait) and when the first of them failed (``since``,
    ISO 8601: the retry window runs from there). ``since`` is kept in the document beside
    ``attempts``, as ``attempts_since``, so that a release that knows only the other three
    fields still reads the state."""

    task: str
    step: int
    failed: int
    since: str | None = None


@dataclass(frozen=True)
class SessionState:
    status: Literal["running", "failed"] = RUNNING
    next_step: int = 1
    completed: tuple[str, ...] = ()
    context: dict[str, Any] = field(default_factory=dict)
    failure: Failure | None = None
    processed: int = 0
    failed: int = 0
    # ContinueOnFailure: the latest row that was dead-lettered, so that its redelivery (a crash
    # between writing this state and the dead-letter) is dead-lettered again, not completed.
    skipped: Failure | None = None
    attempts: Attempts | None = None
    version: int = STATE_VERSION

    @property
    def is_failed(self) -> bool:
        return self.status == FAILED

    def failed_attempts(self, task: str, step: int) -> int:
        """How many attempts at this step failed so far (0 when another step was retried)."""
        attempts = self.attempts
        if attempts is not None and attempts.task == task and attempts.step == step:
            return attempts.failed
        return 0

    def retrying_since(self, task: str, step: int) -> str | None:
        """When this step first failed transiently (None: it has not, or another step was
        retried)."""
        attempts = self.attempts
        if attempts is not None and attempts.task == task and attempts.step == step:
            return attempts.since
        return None

    def after_failed_attempt(self, task: str, step: int, attempt: int, at: str) -> SessionState:
        """The step failed transiently at ``attempt`` (at ``at``) and will be retried; its
        window keeps running from its first failure."""
        since = self.retrying_since(task, step) or at
        return replace(self, attempts=Attempts(task, step, attempt, since))

    def after_success(self, task: str, step: int, outputs: dict[str, Any]) -> SessionState:
        """The step ran. ``completed`` names each task once, in the order they first
        completed, so the state of a session of many rows of one task (an import) stays the
        size of a few names: Service Bus caps a session's state at its message size limit
        (256 KB on Standard); ``processed`` counts the rows."""
        return replace(
            self,
            next_step=max(self.next_step, step + 1),
            completed=self.completed if task in self.completed else (*self.completed, task),
            context={**self.context, **outputs},
            processed=self.processed + 1,
            attempts=None,
        )

    def after_skipped_failure(self, failure: Failure) -> SessionState:
        """ContinueOnFailure: the message is dead-lettered and the session goes on past its
        step (a message whose step could not be read moves nothing on)."""
        return replace(
            self,
            next_step=max(self.next_step, (failure.step or 0) + 1),
            processed=self.processed + 1,
            failed=self.failed + 1,
            skipped=failure,
            attempts=None,
        )

    def skipped_at(self, task: str, step: int) -> Failure | None:
        """The failure this step was dead-lettered with, if it is the latest skipped one."""
        if self.skipped is not None and self.skipped.step == step and self.skipped.task == task:
            return self.skipped
        return None

    def mark_failed(self, failure: Failure) -> SessionState:
        """StopOnFailure: the first failure is kept; later ones do not overwrite it."""
        first = self.failure or failure
        return replace(self, status=FAILED, failure=first, failed=self.failed + 1, attempts=None)

    def to_bytes(self) -> bytes:
        document = asdict(self)
        document["completed"] = list(self.completed)
        attempts = document["attempts"]
        if attempts is not None:
            since = attempts.pop("since")
            if since is not None:
                document["attempts_since"] = since
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
        state = SessionState(
            status=document["status"],
            next_step=document["next_step"],
            completed=tuple(document["completed"]),
            context=dict(document["context"]),
            failure=_failure(document.get("failure"), "failure"),
            processed=document.get("processed", 0),
            failed=document.get("failed", 0),
            skipped=_failure(document.get("skipped"), "skipped"),
            attempts=_attempts(document.get("attempts"), document.get("attempts_since")),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise CorruptSessionState(f"session state has a bad shape: {error!r}") from error
    if state.status not in (RUNNING, FAILED):
        raise CorruptSessionState(f"unknown session status {state.status!r}")
    for name in ("next_step", "processed", "failed"):
        if not _is_int(getattr(state, name)):
            raise CorruptSessionState(f"{name} is not an integer")
    if not all(isinstance(task, str) for task in state.completed):
        raise CorruptSessionState("completed holds something other than task names")
    return state


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _failure(document: object, name: str) -> Failure | None:
    if document is None:
        return None
    if not isinstance(document, dict):
        raise CorruptSessionState(f"{name} is not an object")
    failure = Failure(**document)
    if not all(isinstance(v, str) for v in (failure.task, failure.reason, failure.description)):
        raise CorruptSessionState(f"{name} has a field that is not text")
    if not isinstance(failure.at, str):
        raise CorruptSessionState(f"{name}.at is not text")
    if failure.step is not None and not _is_int(failure.step):
        raise CorruptSessionState(f"{name}.step is not an integer")
    return failure


def _attempts(document: object, since: object) -> Attempts | None:
    if document is None:
        return None
    if not isinstance(document, dict):
        raise CorruptSessionState("attempts is not an object")
    if since is not None and not isinstance(since, str):
        raise CorruptSessionState("attempts_since is not text")
    attempts = Attempts(**document, since=since)
    if not isinstance(attempts.task, str):
        raise CorruptSessionState("attempts.task is not text")
    if not (_is_int(attempts.step) and _is_int(attempts.failed)):
        raise CorruptSessionState("attempts.step or attempts.failed is not an integer")
    return attempts
