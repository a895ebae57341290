"""Failures grouped by root cause: within one (queue, task, reason) group, by the fingerprint
of their description with its variable parts normalised."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..domain.archive import FailedSession
from ..domain.fingerprints import fingerprint, normalise
from .failed_sessions import MAX_PAGE_SIZE, list_failed_sessions
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
    archive: DeadLetterArchive,
    *,
    queue: str | None = None,
    task: str | None = None,
    reason: str | None = None,
    status: str | None = "failed",
) -> list[FailureFingerprint]:
    """The fingerprints of the matching sessions, most sessions first."""
    found: dict[str, list[FailedSession]] = {}
    for summary in _every_session(archive, queue=queue, task=task, reason=reason, status=status):
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
    archive: DeadLetterArchive,
    wanted: str,
    *,
    queue: str | None = None,
    task: str | None = None,
    reason: str | None = None,
    status: str | None = "failed",
) -> list[FailedSession]:
    """Every matching session whose fingerprint is ``wanted``."""
    return [
        s
        for s in _every_session(archive, queue=queue, task=task, reason=reason, status=status)
        if fingerprint(s.queue, s.failed_task, s.reason, s.description) == wanted
    ]


def _every_session(
    archive: DeadLetterArchive,
    *,
    queue: str | None,
    task: str | None,
    reason: str | None,
    status: str | None,
) -> Iterator[FailedSession]:
    continuation: str | None = None
    while True:
        page = list_failed_sessions(
            archive,
            queue=queue,
            task=task,
            reason=reason,
            status=status,
            page_size=MAX_PAGE_SIZE,
            continuation=continuation,
        )
        yield from page.items
        continuation = page.continuation
        if not continuation:
            return
