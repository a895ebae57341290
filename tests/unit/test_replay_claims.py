"""One replay per failed session: the claim on the session's summary decides, whatever the
keys, the interleaving or the number of concurrent requests. Each race states its
interleaving; the thread test only adds numbers. (The claim's ETag race on a real table:
tests/integration/test_table_archive.py.)"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from shared.domain.archive import AlreadyReplayed, ReplayIncomplete, replay_session_id
from shared.domain.confirmations import Selection
from shared.service_layer.bulk_replay import request_bulk_replay, run_bulk_replay
from shared.service_layer.replay import replay_session
from tests.builders import PIPELINES, failed_purchase
from tests.fakes import (
    InMemoryAuditTrail,
    InMemoryDeadLetterArchive,
    InMemoryReplayRequests,
    InMemoryResender,
    InMemorySessionSeeder,
    archive_holding,
)

QUEUE = "purchase-tasks"


def archive_of(*sessions: str, upto: int = 5) -> InMemoryDeadLetterArchive:
    letters = [letter for s in sessions for letter in failed_purchase(s, upto=upto)]
    return archive_holding(*letters)


def replay(archive: Any, resender: InMemoryResender, session: str, key: str) -> Any:
    return replay_session(
        archive, resender, InMemorySessionSeeder(), session, key, pipelines=PIPELINES
    )


class BeforeClaim:
    """The archive, except that ``hook`` runs once, just before the first claim is written:
    another request gets in between this one's reading the session and its claim."""

    def __init__(self, archive: InMemoryDeadLetterArchive, hook: Callable[[], None]) -> None:
        self._archive, self._hook = archive, hook

    def claim_replay(self, session_id: str, claim: Any) -> Any:
        hook, self._hook = self._hook, lambda: None
        hook()
        return self._archive.claim_replay(session_id, claim)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._archive, name)


def test_a_replay_under_another_key_is_refused_naming_the_replay_that_won() -> None:
    archive = archive_of("s-1")
    winner, loser = InMemoryResender(), InMemoryResender()
    replay(archive, winner, "s-1", "key-1")

    with pytest.raises(AlreadyReplayed) as refused:
        replay(archive, loser, "s-1", "key-2")

    assert refused.value.claim.key == "key-1"
    assert refused.value.members["replay"]["new_session_id"] == replay_session_id("s-1", "key-1")
    assert len(winner.sent) == 3 and loser.sent == []


def test_a_claim_between_reading_the_session_and_claiming_it_wins_and_the_reader_sends_none() -> (
    None
):
    archive = archive_of("s-1")
    first, second = InMemoryResender(), InMemoryResender()

    # Interleaving: key-2 reads the session (all rows failed, nothing replayed yet); key-1
    # replays it whole; key-2 then tries to claim.
    racing = BeforeClaim(archive, lambda: replay(archive, first, "s-1", "key-1"))
    with pytest.raises(AlreadyReplayed):
        replay(racing, second, "s-1", "key-2")

    assert len(first.sent) == 3 and second.sent == []
    held = archive.get_summary("s-1").claim
    assert held is not None and held.key == "key-1"


def test_a_replay_that_died_after_its_claim_is_finished_by_its_key_and_by_no_other() -> None:
    archive = archive_of("s-1")

    class Died(Exception):
        pass

    class DiesOnSend(InMemoryResender):
        def resend(self, *args: Any) -> None:
            raise Died

    with pytest.raises(Died):
        replay(archive, DiesOnSend(), "s-1", "key-1")
    with pytest.raises(AlreadyReplayed):
        replay(archive, InMemoryResender(), "s-1", "key-2")
    again = InMemoryResender()

    result = replay(archive, again, "s-1", "key-1")

    assert (result.sent, len(again.sent)) == (3, 3)


def test_an_incomplete_session_is_refused_before_it_is_claimed() -> None:
    archive = archive_of("s-1", upto=4)

    with pytest.raises(ReplayIncomplete):
        replay(archive, InMemoryResender(), "s-1", "too-early")

    assert archive.get_summary("s-1").claim is None
    forced = replay_session(
        archive,
        InMemoryResender(),
        InMemorySessionSeeder(),
        "s-1",
        "key-2",
        force=True,
        pipelines=PIPELINES,
    )
    assert forced.sent == 2


def test_ten_concurrent_replays_with_ten_keys_send_the_session_once() -> None:
    archive = archive_of("s-1")
    resender = InMemoryResender()
    start = threading.Barrier(10)

    def attempt(n: int) -> str:
        start.wait()
        try:
            replay(archive, resender, "s-1", f"key-{n}")
        except AlreadyReplayed:
            return "refused"
        return "replayed"

    with ThreadPoolExecutor(max_workers=10) as pool:
        outcomes = list(pool.map(attempt, range(10)))

    assert sorted(outcomes) == ["refused"] * 9 + ["replayed"]
    assert len(resender.sent) == 3
    assert len({session for _, session, _ in resender.sent}) == 1


def test_two_bulk_replays_of_one_group_replay_each_session_once_and_report_what_was_taken() -> None:
    archive = archive_of("s-1", "s-2", "s-3")
    requests = InMemoryReplayRequests()
    one = request_bulk_replay(requests, requests, Selection(reason="PaymentProviderUnavailable"))
    two = request_bulk_replay(requests, requests, Selection(reason="PaymentProviderUnavailable"))
    first, second = InMemoryResender(), InMemoryResender()

    def run(request_id: str, ports: Any, resender: InMemoryResender) -> Any:
        return run_bulk_replay(
            requests,
            ports,
            resender,
            InMemorySessionSeeder(),
            request_id,
            audit=InMemoryAuditTrail(),
            pipelines=PIPELINES,
        )

    # Interleaving: the second request lists the group (all three failed), then the first
    # runs whole before the second claims its first session.
    done_one: list[Any] = []
    racing = BeforeClaim(archive, lambda: done_one.append(run(one.request_id, archive, first)))
    done_two = run(two.request_id, racing, second)

    assert (done_one[0].found, done_one[0].sent, done_one[0].taken) == (3, 3, 0)
    assert (done_two.found, done_two.sent, done_two.taken, done_two.failed) == (3, 0, 3, 0)
    assert {t["session_id"] for t in done_two.taken_sessions} == {"s-1", "s-2", "s-3"}
    assert {t["idempotency_key"] for t in done_two.taken_sessions} == {f"bulk:{one.request_id}"}
    assert len(first.sent) == 9 and second.sent == []
