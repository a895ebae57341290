"""The session queues as the processor and a job's start see them: a session's state and
settlement, the send of a job's messages, and how each session ended."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from ...domain.envelope import TaskMessage
from ...domain.session_outcomes import SessionOutcome


class SessionActions(Protocol):
    """What the processor may do with the session and the message it is handling."""

    def get_state(self) -> bytes | None:
        """The session's state as last set; None when it has none. (None is the state's
        value here, not a missing session: the SDK's ``get_session_state`` answers the same.)"""
        ...

    def set_state(self, state: bytes | None) -> None:
        """Replace the session's state; None clears it. A failure raises: the invocation
        fails and the message is delivered again."""
        ...

    def complete(self) -> None:
        """Settle the message as done; it is not delivered again. A failure raises: the
        message is delivered again (the processor is safe to re-run)."""
        ...

    def abandon(self) -> None:
        """Hand the message back for another delivery (its delivery count goes up)."""
        ...

    def dead_letter(self, reason: str, description: str) -> None:
        """Move the message to the dead-letter sub-queue with ``reason`` and
        ``description``; it is not delivered again."""
        ...

    def release_session(self) -> None:
        """Let the host take another session as soon as this invocation ends, instead of
        waiting sessionIdleTimeout for more messages: the session's last message is settled."""
        ...

    def renew_lock(self) -> datetime | None:
        """Renew the session's lock (an invocation that waits keeps its session); returns
        until when it is locked, when the host says."""
        ...


class TaskSender(Protocol):
    def send_session(
        self, queue_name: str, session_id: str, messages: Sequence[TaskMessage]
    ) -> None:
        """Send the messages of one session, in order, all or none."""
        ...


class SessionOutcomes(Protocol):
    """How each session ended (``SessionOutcome``), recorded by the processor for every
    pipeline; one per session, overwritten when recorded again."""

    def record(self, outcome: SessionOutcome) -> None:
        """Store how the session ended (overwrites)."""
        ...

    def accept(self, outcome: SessionOutcome) -> None:
        """Record a session about to be sent, unless it already ended (a repeated start of a
        job that ran): never overwrites."""
        ...

    def withdraw(self, job_id: str, session_id: str) -> None:
        """Forget a session recorded as accepted whose messages could not be sent: only
        while it is still accepted (never an outcome); succeeds when there is none."""
        ...

    def find(self, job_id: str, session_id: str) -> SessionOutcome | None:
        """The session's outcome, or None when none was recorded."""
        ...

    def of_job(self, job_id: str) -> list[SessionOutcome]:
        """Every recorded session of the job, oldest first; empty when none ended yet."""
        ...

    def of_pipeline(self, pipeline: str, *, up_to: int) -> list[SessionOutcome]:
        """Recorded sessions of the pipeline's jobs, at most ``up_to`` of them (in no
        particular order)."""
        ...

    def latest_of_pipeline(self, pipeline: str, *, up_to: int) -> dict[str, SessionOutcome]:
        """The latest recorded session of each of the pipeline's jobs, by job id, for at most
        ``up_to`` jobs: what a page that counts them every few seconds reads."""
        ...
