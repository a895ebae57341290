"""An operator's pause of a pipeline, and its end: no task of the pipeline runs while it is
paused, in any instance; its messages wait in their queue, or held by an invocation that hands
them back unrun (one delivery, no attempt) once it has held them ``TASK_HOLD_SECONDS``.
Each pause and resume is audited (who, when, the note), under the pseudo-session
``pipeline:<name>``, which the console's pipeline history reads."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..domain.audit import NOTE_MAX, AuditEntry
from ..domain.errors import InvalidInput, NotFound
from ..domain.pauses import ManualPause, Paused
from .circuits import Gates
from .clock import Clock, utc_now
from .operator_ports import AuditTrail, PipelinePauses


class UnknownPipelineName(NotFound):
    def __init__(self, pipeline: str, known: Iterable[str]) -> None:
        super().__init__(
            f"No pipeline is named {pipeline!r}; the pipelines are {', '.join(sorted(known))}."
        )


@dataclass(frozen=True)
class PipelineState:
    pipeline: str
    queue: str
    paused: Paused | None


def audit_key(pipeline: str) -> str:
    """The pseudo-session a pipeline's pauses are audited under."""
    return f"pipeline:{pipeline}"


class PipelineControls:
    """Pause and resume the declared pipelines (``queues``: each one's queue, by name)."""

    def __init__(
        self,
        queues: dict[str, str],
        pauses: PipelinePauses,
        gates: Gates,
        audit: AuditTrail,
        *,
        clock: Clock = utc_now,
    ) -> None:
        self._queues = queues
        self._pauses = pauses
        self._gates = gates
        self._audit = audit
        self._clock = clock

    def states(self) -> list[PipelineState]:
        """Each pipeline, paused or not, as this process sees it."""
        paused = self._gates.paused()
        return [
            PipelineState(name, queue, paused.get(name)) for name, queue in self._queues.items()
        ]

    def state(self, pipeline: str) -> PipelineState:
        self._known(pipeline)
        return PipelineState(pipeline, self._queues[pipeline], self._gates[pipeline].paused())

    def pause(self, pipeline: str, *, who: str, note: str | None, role: str = "") -> PipelineState:
        """Pause the pipeline (a note is required). Pausing a paused pipeline keeps the first
        pause, its author and note, and records nothing more."""
        self._known(pipeline)
        text = _note(note)
        at = self._clock().isoformat()
        kept = self._pauses.pause(pipeline, ManualPause(who, text, at))
        self._gates[pipeline].known(kept)
        if kept.at == at and kept.by == who:
            entry = AuditEntry(audit_key(pipeline), "pause", who, at, text, role=role)
            self._audit.record(entry)
        return self.state(pipeline)

    def resume(self, pipeline: str, *, who: str, note: str | None, role: str = "") -> PipelineState:
        """End the pipeline's pause (a note is required); a pipeline that runs stays as it
        is, and nothing is recorded."""
        self._known(pipeline)
        text = _note(note)
        ended = self._pauses.resume(pipeline)
        self._gates[pipeline].known(None)
        if ended is not None:
            at = self._clock().isoformat()
            entry = AuditEntry(audit_key(pipeline), "resume", who, at, text, role=role)
            self._audit.record(entry)
        return self.state(pipeline)

    def history(self, pipeline: str) -> list[AuditEntry]:
        """Every pause and resume of the pipeline, oldest first."""
        self._known(pipeline)
        return self._audit.history(audit_key(pipeline))

    def _known(self, pipeline: str) -> None:
        if pipeline not in self._queues:
            raise UnknownPipelineName(pipeline, self._queues)


def _note(note: str | None) -> str:
    text = (note or "").strip()
    if not text:
        raise InvalidInput("note", "is required: say why, for the audit trail")
    if len(text) > NOTE_MAX:
        raise InvalidInput("note", f"must be at most {NOTE_MAX} characters")
    return text
