"""The dead-letter archive on a real Azurite: keys, big bodies, transactions, summaries."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Literal

import pytest
from azure.data.tables import TableClient, TableServiceClient
from azure.storage.blob import BlobServiceClient, ContainerClient

from shared.adapters.table_archive import TableDeadLetterArchive
from shared.adapters.table_keys import table_key, value_of_table_key
from shared.adapters.table_replay_requests import TableReplayRequests
from shared.domain.archive import (
    RESOLVE,
    ArchivedMessage,
    FailedSession,
    FailureRecord,
    ReplayClaim,
    SessionNotArchived,
    SummaryFilter,
)
from shared.domain.errors import InvalidInput
from shared.domain.replays import ReplayRequest, ReplayRequestNotFound

pytestmark = pytest.mark.integration

HOSTILE_SESSION_IDS = {
    "slash": "orders/2026/11",
    "backslash": "C:\\temp\\x",
    "hash": "order#42",
    "question": "what?really",
    "control": "tab\there\x01bell\x7f",
    "tilde": "~7E~",
    "unicode": "bestilling-æøå-🚀",
    "max-length": "s" * 127 + "/",
}


def row(
    session_id: str | None,
    seq: int,
    *,
    body: bytes = b"{}",
    reason: str = "SessionFailed",
    step: int = 1,
    is_last: bool = False,
    queue: str = "purchase-tasks",
) -> ArchivedMessage:
    return ArchivedMessage(
        queue=queue,
        session_id=session_id,
        sequence_number=seq,
        message_id=f"m-{seq}",
        body=body,
        content_type="application/json",
        application_properties={"step": step, "is_last": is_last, "task": "T"},
        reason=reason,
        description=f"why {seq}",
        enqueued_time="2026-11-23T09:00:00+00:00",
        delivery_count=1,
        archived_at="2026-11-23T09:05:00+00:00",
        job_id="job",
        task="T",
        step=step,
        is_last=is_last,
    )


class CountingTable:
    """A real TableClient that counts the transactions it submits."""

    def __init__(self, table: TableClient) -> None:
        self._table = table
        self.transactions: list[int] = []

    def submit_transaction(self, operations):
        operations = list(operations)
        self.transactions.append(len(operations))
        return self._table.submit_transaction(operations)

    def __getattr__(self, name):
        return getattr(self._table, name)


@pytest.fixture
def archive_tables(
    table_service_client: TableServiceClient, blob_service_client: BlobServiceClient
) -> Iterator[tuple[CountingTable, TableClient, ContainerClient]]:
    suffix = uuid.uuid4().hex[:12]
    rows = table_service_client.create_table(f"dl{suffix}")
    sessions = table_service_client.create_table(f"fs{suffix}")
    bodies = blob_service_client.create_container(f"bodies{suffix}")
    yield CountingTable(rows), sessions, bodies
    table_service_client.delete_table(rows.table_name)
    table_service_client.delete_table(sessions.table_name)
    bodies.delete_container()


@pytest.fixture
def archive(archive_tables) -> TableDeadLetterArchive:
    rows, sessions, bodies = archive_tables
    return TableDeadLetterArchive(rows, sessions, bodies)


@pytest.mark.parametrize("name", list(HOSTILE_SESSION_IDS))
def test_hostile_session_ids_are_valid_keys_that_map_back_exactly(
    archive: TableDeadLetterArchive, name: str
) -> None:
    session_id = HOSTILE_SESSION_IDS[name]
    assert value_of_table_key(table_key(session_id)) == session_id

    archive.save([row(session_id, 7), row(session_id, 3)])

    rows = archive.list_session(session_id)
    assert [r.session_id for r in rows] == [session_id, session_id]
    assert [r.sequence_number for r in rows] == [3, 7]
    assert rows[0].row_key == "00000000000000000003"


def test_a_200_kib_body_goes_to_blob_and_comes_back_byte_exact(
    archive: TableDeadLetterArchive, archive_tables
) -> None:
    body = os.urandom(200 * 1024)
    archive.save([row("big", 1, body=body), row("big", 2, body=b"small")])

    rows = archive.list_session("big")

    assert rows[0].body == body and rows[1].body == b"small"
    _, _, bodies = archive_tables
    assert len(list(bodies.list_blobs())) == 1


def test_250_dead_letters_of_one_session_take_3_transactions(
    archive: TableDeadLetterArchive, archive_tables
) -> None:
    used = archive.save([row("busy", n) for n in range(1, 251)])

    counting, _, _ = archive_tables
    assert used == 3 and counting.transactions == [100, 100, 50]
    assert len(archive.list_session("busy")) == 250


def test_saving_again_upserts_rather_than_duplicating(archive: TableDeadLetterArchive) -> None:
    archive.save([row("again", 1), row("again", 2)])
    archive.save([row("again", 1), row("again", 2)])
    assert [r.sequence_number for r in archive.list_session("again")] == [1, 2]


def test_many_big_bodies_are_split_under_the_transaction_size_limit(
    archive: TableDeadLetterArchive, archive_tables
) -> None:
    body = b"x" * (50 * 1024)  # inline, but 100 of them would exceed 4 MiB
    used = archive.save([row("heavy", n, body=body) for n in range(1, 101)])
    assert used >= 2
    assert all(r.body == body for r in archive.list_session("heavy"))


def test_rows_can_be_marked_replayed(archive: TableDeadLetterArchive) -> None:
    archive.save([row("r", 1), row("r", 2, is_last=True)])
    archive.mark_replayed(
        [r.replayed(session_id="replay-x", key="k", at="now") for r in archive.list_session("r")]
    )
    rows = archive.list_session("r")
    assert {(r.status, r.replayed_session_id, r.replay_key) for r in rows} == {
        ("replayed", "replay-x", "k")
    }
    assert rows[1].is_last and rows[0].body == b"{}"


def summary(
    session_id: str,
    *,
    task: str,
    reason: str,
    status: Literal["failed", "replayed"] = "failed",
    queue: str = "purchase-tasks",
) -> FailedSession:
    return FailedSession(
        session_id=session_id,
        queue=queue,
        failed_task=task,
        failed_step=3,
        reason=reason,
        description="d",
        failed_at="2026-11-23T09:00:00+00:00",
        message_count=3,
        has_last=True,
        context={"order_number": "ORD-1"},
        status=status,
    )


def test_failure_records_and_summaries_share_a_row_and_filter_and_page(
    archive: TableDeadLetterArchive,
) -> None:
    assert archive.find_record("x/1") is None
    with pytest.raises(SessionNotArchived):
        archive.get_summary("x/1")
    archive.record(
        "x/1",
        FailureRecord(
            "ProcessPayment", 3, "PaymentProviderUnavailable", "d", "at", {"total": "29.95"}
        ),
    )
    # A record alone (dead letters not archived yet) is not a listed failed session.
    assert archive.list_summaries(SummaryFilter()).items == []
    for n in range(7):
        archive.save_summary(
            summary(f"x/{n}", task="ProcessPayment", reason="PaymentProviderUnavailable")
        )
    archive.save_summary(summary("y", task="CalculateTotal", reason="UnknownSku"))
    archive.save_summary(
        summary("z", task="CalculateTotal", reason="UnknownSku", status="replayed")
    )

    record = archive.find_record("x/1")
    assert record is not None and record.context == {"total": "29.95"}
    assert archive.get_summary("x/1").failed_task == "ProcessPayment"

    seen, token, pages = [], None, 0
    while True:
        page = archive.list_summaries(
            SummaryFilter(reason="PaymentProviderUnavailable"), page_size=3, continuation=token
        )
        seen += [s.session_id for s in page.items]
        pages += 1
        token = page.continuation
        if not token:
            break
    assert sorted(seen) == [f"x/{n}" for n in range(7)] and pages >= 3
    only = archive.list_summaries(SummaryFilter(task="CalculateTotal", status="failed"))
    assert [s.session_id for s in only.items] == ["y"]
    with pytest.raises(InvalidInput, match="continuation"):
        archive.list_summaries(SummaryFilter(), continuation="not-a-token!")


def test_replay_requests_round_trip(table: TableClient) -> None:
    store = TableReplayRequests(table)
    with pytest.raises(ReplayRequestNotFound):
        store.get("nope")
    request = ReplayRequest(
        "r-1",
        None,
        "ProcessPayment",
        None,
        status="running",
        found=3,
        sent=2,
        failed=1,
        errors=({"session_id": "s", "error": "e"},),
        created_at="a",
        updated_at="b",
    )
    store.save(request)
    assert store.get("r-1") == request


# -- replay claims: the summary row's ETag decides -------------------------------------------------


class ReadThenLetOtherWrite:
    """The summary table, except that right after this archive first reads the row, ``other``
    runs: the interleaving where a claim lands between another claimer's read and write."""

    def __init__(self, table: TableClient, other: Callable[[], object]) -> None:
        self._table, self._other = table, other

    def get_entity(self, *args: Any, **kwargs: Any) -> Any:
        entity = self._table.get_entity(*args, **kwargs)
        other, self._other = self._other, lambda: None
        other()
        return entity

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)


def claim(key: str) -> ReplayClaim:
    return ReplayClaim(key, f"replay-of-{key}", "2026-11-23T09:10:00+00:00")


def test_a_claim_is_recorded_once_and_every_later_claim_gets_it_back(
    archive: TableDeadLetterArchive,
) -> None:
    archive.save_summary(summary("c/1", task="ProcessPayment", reason="R"))

    assert archive.claim_replay("c/1", claim("key-1")) == claim("key-1")
    assert archive.claim_replay("c/1", claim("key-2")) == claim("key-1")
    # The archive run refreshes the summary by merging its own columns: the claim stays.
    archive.save_summary(summary("c/1", task="ProcessPayment", reason="R"))
    assert archive.get_summary("c/1").claim == claim("key-1")


def test_a_claim_written_between_another_claims_read_and_write_wins_by_its_etag(
    archive_tables: tuple[CountingTable, TableClient, ContainerClient],
) -> None:
    rows, sessions, bodies = archive_tables
    winner = TableDeadLetterArchive(rows, sessions, bodies)  # type: ignore[arg-type]
    winner.save_summary(summary("c/2", task="ProcessPayment", reason="R"))
    won: list[ReplayClaim] = []
    racing = ReadThenLetOtherWrite(
        sessions, lambda: won.append(winner.claim_replay("c/2", claim("key-1")))
    )
    loser = TableDeadLetterArchive(rows, racing, bodies)  # type: ignore[arg-type]

    held = loser.claim_replay("c/2", claim("key-2"))

    assert won == [claim("key-1")] and held == claim("key-1")
    assert winner.get_summary("c/2").claim == claim("key-1")


def test_ten_concurrent_claims_record_one(archive: TableDeadLetterArchive) -> None:
    archive.save_summary(summary("c/3", task="ProcessPayment", reason="R"))
    start = threading.Barrier(10)

    def attempt(n: int) -> ReplayClaim:
        start.wait()
        return archive.claim_replay("c/3", claim(f"key-{n}"))

    with ThreadPoolExecutor(max_workers=10) as pool:
        held = set(pool.map(attempt, range(10)))

    assert len(held) == 1 and held == {archive.get_summary("c/3").claim}


def test_a_session_without_a_summary_cannot_be_claimed(archive: TableDeadLetterArchive) -> None:
    with pytest.raises(SessionNotArchived):
        archive.claim_replay("nope", claim("key-1"))


def test_a_session_replayed_before_claims_were_recorded_is_held_by_that_replay(
    archive: TableDeadLetterArchive,
) -> None:
    replayed = replace(
        summary("c/4", task="ProcessPayment", reason="R", status="replayed"),
        replayed_session_id="replay-old",
        replay_key="old-key",
        replayed_at="then",
    )
    archive.save_summary(replayed)

    assert archive.claim_replay("c/4", claim("key-1")) == ReplayClaim(
        "old-key", "replay-old", "then"
    )


# -- resolutions: the same claim, and the session leaves the failed list ------------------------


def test_a_resolution_claims_the_session_and_moves_it_from_failed_to_resolved(
    archive: TableDeadLetterArchive,
) -> None:
    archive.save_summary(summary("r/1", task="ProcessPayment", reason="Dup"))
    archive.save_summary(summary("r/2", task="ProcessPayment", reason="Dup"))
    resolution = ReplayClaim("resolve-1", "", "2026-11-23T09:10:00+00:00", action=RESOLVE)

    assert archive.claim_replay("r/1", resolution) == resolution
    assert archive.claim_replay("r/1", claim("key-2")) == resolution
    # An archive run that rewrites the summary's columns (status "failed") does not undo it.
    archive.save_summary(summary("r/1", task="ProcessPayment", reason="Dup"))

    def listed(status: str) -> list[str]:
        page = archive.list_summaries(SummaryFilter(reason="Dup", status=status), page_size=50)
        return sorted(s.session_id for s in page.items)

    assert listed("failed") == ["r/2"]
    assert listed("resolved") == ["r/1"]
    assert archive.get_summary("r/1").status == "resolved"
    assert archive.get_summary("r/1").claim == resolution
