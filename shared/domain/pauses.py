"""Why a pipeline is paused: its circuit opened (a dependency out of reach), or an operator
paused it by hand. While paused, no task of the pipeline runs; its messages wait."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

CIRCUIT: Literal["circuit"] = "circuit"
MANUAL: Literal["manual"] = "manual"
Cause = Literal["circuit", "manual"]


@dataclass(frozen=True)
class ManualPause:
    """An operator's pause, as stored: who, why, when (ISO 8601, UTC)."""

    by: str
    note: str
    at: str


@dataclass(frozen=True)
class Paused:
    """A pipeline paused now. ``dependency``: what its circuit found out of reach (cause
    ``circuit``); ``by`` and ``note``: who paused it and why (cause ``manual``)."""

    pipeline: str
    cause: Cause
    since: str  # ISO 8601, UTC
    dependency: str | None = None
    by: str | None = None
    note: str | None = None

    @property
    def summary(self) -> str:
        """One line for a person, to the second: ``Table Storage unreachable since
        2026-11-27T12:03:10+00:00`` or ``paused by ada@example.com since ...: <note>``."""
        since = datetime.fromisoformat(self.since).isoformat(timespec="seconds")
        if self.cause == CIRCUIT:
            return f"{self.dependency} unreachable since {since}"
        return f"paused by {self.by} since {since}: {self.note}"


def manually_paused(pipeline: str, pause: ManualPause) -> Paused:
    return Paused(pipeline, MANUAL, pause.at, by=pause.by, note=pause.note)
