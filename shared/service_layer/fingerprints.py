"""Failures grouped by root cause: within one (queue, task, reason) group, by the fingerprint
of their description with its variable parts normalised."""

from __future__ import annotations

from dataclasses import dataclass

from ..domain.archive import FailedSession, SummaryFilter
from ..domain.fingerprints import fingerprint, normalise
from .failed_sessions import every_session
from .ports import DeadLetterArchive

SAMPLE_SIZE = 5


@dataclass(frozen=True)
class FailureFingerprint:
    fingerprint: str
    queue: str
    failed_task: str | None
    reason: str
    description: str  # normalised: <n> for numbers and amounts, <id> for ids
    example: str  # one session's own description
    sessions: int
    sample: tuple[str, ...]  # the first session ids, at most SAMPLE_SIZE


def failure_fingerprints(
    archive: DeadLetterArchive, selected: SummaryFilter
) -> list[FailureFingerprint]:
    """The fingerprints of the sessions ``selected``, most sessions first."""
    found: dict[str, list[FailedSession]] = {}
    for summary in every_session(archive, selected):
        key = fingerprint(summary.queue, summary.failed_task, summary.reason, summary.description)
        found.setdefault(key, []).append(summary)
    result = [
        FailureFingerprint(
            fingerprint=key,
            queue=members[0].queue,
            failed_task=members[0].failed_task,
            reason=members[0].reason,
            description=normalise(members[0].description),
            example=members[0].description,
            sessions=len(members),
            sample=tuple(s.session_id for s in members[:SAMPLE_SIZE]),
        )
        for key, members in found.items()
    ]
    return sorted(result, key=lambda f: (-f.sessions, f.queue, f.failed_task or "", f.reason))


def sessions_with_fingerprint(
    archive: DeadLetterArchive, wanted: str, selected: SummaryFilter
) -> list[FailedSession]:
    """Every session ``selected`` whose fingerprint is ``wanted``."""
    return [
        s
        for s in every_session(archive, selected)
        if fingerprint(s.queue, s.failed_task, s.reason, s.description) == wanted
    ]
