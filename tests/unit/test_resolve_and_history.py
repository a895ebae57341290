"""Resolve without replay, and a session's history: a resolution claims the session as a
replay does (so of replays and resolutions only the first happens), leaves the default list,
stays searchable, and no bulk replay sends it; the history follows a session's replays, each
with its outcome, and flags one that failed again."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from shared.domain.archive import (
    AlreadyReplayed,
    AlreadyResolved,
    SummaryFilter,
    replay_session_id,
)
from shared.domain.confirmations import Selection
from shared.domain.errors import InvalidInput
from shared.domain.pipelines import PURCHASE
from shared.domain.session_outcomes import SessionOutcome
from shared.service_layer.bulk_actions import confirm_bulk_action, preview_bulk_action
from shared.service_layer.bulk_replay import run_bulk_replay
from shared.service_layer.dead_letters import archive_dead_letters
from shared.service_layer.failed_sessions import list_failed_sessions
from shared.service_layer.history import Progress, session_history
from shared.service_layer.operator_actions import replay_for_operator
from shared.service_layer.resolve import resolve_session
from tests.builders import PIPELINES, failed_purchase
from tests.fakes import (
    InMemoryAuditTrail,
    InMemoryConfirmations,
    InMemoryDeadLetterArchive,
    InMemoryDeadLetterQueue,
    InMemoryReplayRequests,
    InMemoryResender,
    InMemorySessionOutcomes,
    InMemorySessionSeeder,
)

from .test_replay_claims import QUEUE, archive_of, replay


def _resolve(archive: InMemoryDeadLetterArchive, audit: InMemoryAuditTrail, key: str) -> object:
    return resolve_session(archive, audit, "s-1", key, who="ada", note="duplicate order")


def test_a_resolved_session_leaves_the_default_list_stays_searchable_and_keeps_its_note() -> None:
    archive, audit = archive_of("s-1", "s-2"), InMemoryAuditTrail()

    _resolve(archive, audit, "k1")

    failed = list_failed_sessions(archive, SummaryFilter(status="failed")).items
    resolved = list_failed_sessions(archive, SummaryFilter(status="resolved")).items
    assert [s.session_id for s in failed] == ["s-2"]
    assert [s.session_id for s in resolved] == ["s-1"]
    assert archive.get_summary("s-1").status == "resolved"
    (entry,) = audit.history("s-1")
    assert (entry.action, entry.who, entry.note) == ("resolve", "ada", "duplicate order")


def test_a_resolution_needs_a_note_and_repeats_under_its_key_change_nothing() -> None:
    archive, audit = archive_of("s-1"), InMemoryAuditTrail()
    with pytest.raises(InvalidInput) as missing:
        resolve_session(archive, audit, "s-1", "k1", who="ada", note="  ")
    assert missing.value.field == "note"
    assert archive.get_summary("s-1").status == "failed"

    first = _resolve(archive, audit, "k1")
    assert _resolve(archive, audit, "k1") == first
    assert len(audit.history("s-1")) == 1


def test_a_resolved_session_is_never_replayed_and_a_replayed_one_never_resolved() -> None:
    archive, audit, sent = archive_of("s-1", "s-2"), InMemoryAuditTrail(), InMemoryResender()
    _resolve(archive, audit, "k1")
    with pytest.raises(AlreadyResolved):
        replay(archive, sent, "s-1", "k1")  # not even under the resolution's own key
    with pytest.raises(AlreadyResolved):
        _resolve(archive, audit, "k2")
    assert sent.sent == []

    replay(archive, sent, "s-2", "r1")
    with pytest.raises(AlreadyReplayed):
        resolve_session(archive, audit, "s-2", "r1", who="ada", note="too late")


def test_of_concurrent_replays_and_resolutions_of_one_session_exactly_one_happens() -> None:
    archive, audit, sent = archive_of("s-1"), InMemoryAuditTrail(), InMemoryResender()
    start = threading.Barrier(12)

    def act(n: int) -> str:
        start.wait()
        try:
            if n % 2:
                resolve_session(archive, audit, "s-1", f"k{n}", who="ada", note="dup")
            else:
                replay(archive, sent, "s-1", f"k{n}")
        except (AlreadyReplayed, AlreadyResolved):
            return "refused"
        return "done"

    with ThreadPoolExecutor(12) as pool:
        outcomes = list(pool.map(act, range(12)))

    assert outcomes.count("done") == 1
    summary = archive.get_summary("s-1")
    assert summary.claim is not None
    if summary.status == "resolved":
        assert sent.sent == [] and len(audit.history("s-1")) == 1
    else:
        assert len(sent.sent) == 3 and audit.history("s-1") == []


def test_a_bulk_replay_leaves_resolved_sessions_alone_and_a_bulk_resolve_audits_each() -> None:
    archive, audit = archive_of("s-1", "s-2", "s-3"), InMemoryAuditTrail()
    _resolve(archive, audit, "k1")
    tokens, requests = InMemoryConfirmations(), InMemoryReplayRequests()
    everything = Selection(task="ProcessPayment")

    preview = preview_bulk_action(archive, tokens, "resolve", everything)
    assert preview.confirmation.sessions == 2
    request = confirm_bulk_action(
        archive,
        tokens,
        requests,
        requests,
        "resolve",
        preview.confirmation.token,
        who="ada",
        note="provider refunded these",
    )
    sent = InMemoryResender()
    done = run_bulk_replay(
        requests,
        archive,
        sent,
        InMemorySessionSeeder(),
        request.request_id,
        audit=audit,
        pipelines=PIPELINES,
    )

    assert (done.action, done.found, done.sent, done.taken) == ("resolve", 2, 2, 0)
    assert sent.sent == []
    for session in ("s-2", "s-3"):
        (entry,) = audit.history(session)
        assert (entry.action, entry.who, entry.note) == (
            "bulk-resolve",
            "ada",
            "provider refunded these",
        )
    assert list_failed_sessions(archive, SummaryFilter(status="failed")).items == []


def _progress() -> tuple[Progress, InMemorySessionOutcomes]:
    sessions = InMemorySessionOutcomes()
    return Progress(sessions), sessions


def test_the_history_shows_each_replay_its_operator_and_its_outcome() -> None:
    archive, audit = archive_of("s-1"), InMemoryAuditTrail()
    progress, sessions = _progress()
    replay_for_operator(
        archive,
        InMemoryResender(),
        InMemorySessionSeeder(),
        audit,
        "s-1",
        key="console:abcdef123456",
        who="ada",
        note="provider back",
        pipelines=PIPELINES,
    )
    new = replay_session_id("s-1", "console:abcdef123456")
    job = archive.list_session("s-1")[0].job_id
    assert job is not None

    history = session_history(archive, audit, progress, "s-1")
    (running,) = history.replays
    assert (running.new_session_id, running.by, running.outcome) == (new, "ada", "in progress")

    # The processor records the replayed session's end when its last message is settled.
    sessions.record(SessionOutcome(job, new, PURCHASE, "completed", "t"))
    (completed,) = session_history(archive, audit, progress, "s-1").replays
    assert completed.outcome == "completed"
    assert not session_history(archive, audit, progress, "s-1").failed_again


def test_a_replay_that_failed_again_is_flagged_and_its_own_replay_follows() -> None:
    archive, audit = archive_of("s-1"), InMemoryAuditTrail()
    progress, _ = _progress()
    replay(archive, InMemoryResender(), "s-1", "k1")
    again = replay_session_id("s-1", "k1")
    # The replay failed too: its dead letters were archived as a failed session of its own.
    dlq = InMemoryDeadLetterQueue()
    dlq.add(*failed_purchase(again, reason="Unavailable"))
    archive_dead_letters(dlq, archive, queues=[QUEUE])

    history = session_history(archive, audit, progress, "s-1")

    assert history.failed_again
    (first,) = history.replays
    assert (first.outcome, first.reason, first.by) == (
        "failed again",
        "Unavailable",
        "the API (Idempotency-Key k1)",
    )
    replay(archive, InMemoryResender(), again, "k2")
    chain = session_history(archive, audit, progress, "s-1").replays
    assert [r.session_id for r in chain] == ["s-1", again]
    assert chain[1].outcome == "in progress"
