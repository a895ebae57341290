"""How long the app keeps what it writes, and what is never purged while it is still needed.

Each kind of record has a lifetime in days (``Lifetimes``; 0 keeps it for good), counted from
the time the record says it last changed: an Idempotency-Key from when its request started, a
replayed or resolved failed session from its replay or resolution, a job (an order's progress,
its sessions' outcomes, its charge and receipt; an import's manifest and row outcomes) from its
last recorded step, a bulk request from its last update, an audit entry from when it was
recorded, a bulk preview's token from when it expired.

Never purged, whatever its age (``Keep``): a failed session nobody replayed or resolved yet
(its messages and blobs are what a replay sends), and everything of its job; a job still
running (accepted, or with steps still to run); a bulk request still queued or running.
The products and the order-number counters are reference data, not records: no lifetime.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta

from .errors import InvalidInput


@dataclass(frozen=True)
class Lifetimes:
    """Days each kind of record is kept (``RETENTION_<NAME>_DAYS``); 0: for good."""

    idempotency_keys: float = 7.0
    confirmations: float = 1.0
    replayed_sessions: float = 30.0
    resolved_sessions: float = 30.0
    jobs: float = 90.0
    replay_requests: float = 30.0
    audit: float = 365.0

    def __post_init__(self) -> None:
        for name in self.names():
            if getattr(self, name) < 0:
                raise InvalidInput(f"RETENTION_{name.upper()}_DAYS", "must be 0 or more")

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    def cutoff(self, name: str, now: datetime) -> str | None:
        """The ISO time before which a record of kind ``name`` has expired at ``now``; None
        when that kind is kept for good."""
        days = getattr(self, name)
        if not days:
            return None
        return iso(now - timedelta(days=days))


def iso(moment: datetime) -> str:
    """How the app writes a time (``datetime.isoformat`` of an aware UTC time), so that two
    of them compare as strings as they do as times."""
    return moment.isoformat()


@dataclass(frozen=True)
class Keep:
    """What the purge must not touch, whatever its age: the failed sessions nobody acted on
    and the jobs, order numbers (receipts) and sessions they belong to."""

    sessions: frozenset[str] = field(default_factory=frozenset)
    jobs: frozenset[str] = field(default_factory=frozenset)
    order_numbers: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class PurgeReport:
    """What one purge run deleted, by table or container, and whether it stopped at its time
    budget with more to do."""

    deleted: dict[str, int] = field(default_factory=dict)
    stopped_early: bool = False

    @property
    def total(self) -> int:
        return sum(self.deleted.values())
