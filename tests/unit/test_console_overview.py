"""The console's front page: failed and replayed sessions, and dead letters not archived yet."""

from __future__ import annotations

from dataclasses import replace

from shared.domain.archive import FailedSession
from shared.service_layer.overview import WAITING_COUNT_MAX, overview
from tests.fakes import InMemoryDeadLetterArchive, InMemoryDeadLetterCounter


def _session(session_id: str, reason: str) -> FailedSession:
    return FailedSession(
        session_id, "purchase-tasks", "ProcessPayment", 3, reason, "d", None, 3, True, {}
    )


def test_the_overview_counts_groups_replays_and_what_waits_for_the_archive() -> None:
    archive = InMemoryDeadLetterArchive()
    archive.save_summary(_session("a", "PaymentDeclined"))
    archive.save_summary(_session("b", "PaymentProviderUnavailable"))
    archive.save_summary(_session("c", "PaymentProviderUnavailable"))
    archive.save_summary(replace(_session("d", "PaymentDeclined"), status="replayed"))
    counter = InMemoryDeadLetterCounter({"purchase-tasks": 4, "imports": 5000})

    now = overview(archive, counter, ["purchase-tasks", "imports"])

    assert (now.failed, now.replayed) == (3, 1)
    assert [(g.reason, g.sessions) for g in now.groups] == [
        ("PaymentProviderUnavailable", 2),
        ("PaymentDeclined", 1),
    ]
    assert now.waiting == {"purchase-tasks": 4, "imports": WAITING_COUNT_MAX}
