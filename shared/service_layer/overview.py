"""The console's front page in one read: failed sessions by group, how many were replayed, and
the dead letters still waiting for the archive timer in each session queue."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .failed_sessions import FailureGroup, group_failed_sessions
from .operator_ports import DeadLetterCounter
from .ports import DeadLetterArchive

WAITING_COUNT_MAX = 1000  # past this the page says "1000+": counting costs a peek per 250


@dataclass(frozen=True)
class Overview:
    groups: list[FailureGroup]
    failed: int
    replayed: int
    waiting: dict[str, int]  # queue -> dead letters not archived yet (at most WAITING_COUNT_MAX)


def overview(
    archive: DeadLetterArchive, counter: DeadLetterCounter, queues: Sequence[str]
) -> Overview:
    groups = group_failed_sessions(archive, status="failed")
    replayed = group_failed_sessions(archive, status="replayed")
    return Overview(
        groups=groups,
        failed=sum(g.sessions for g in groups),
        replayed=sum(g.sessions for g in replayed),
        waiting={q: counter.waiting(q, up_to=WAITING_COUNT_MAX) for q in queues},
    )
