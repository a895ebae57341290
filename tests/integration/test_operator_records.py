"""The operator's records on Azurite: the audit trail of a session in the order things
happened, each request's entry once; confirmation tokens that confirm one action only, even
when presented twice at once; and what the overview and the order lookup read."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from azure.data.tables import TableClient

from shared.adapters.table_audit import TableAuditTrail
from shared.adapters.table_confirmations import TableConfirmations
from shared.adapters.table_import_manifests import TableManifestStore
from shared.adapters.table_order_numbers import TableOrderNumbers
from shared.adapters.table_order_progress import TableOrderProgress
from shared.domain.audit import AuditEntry, Change, MessageEdit
from shared.domain.confirmations import ConfirmationRefused, Selection, digest_of, expiry
from shared.domain.import_jobs import JobManifest
from shared.domain.order_status import StepOutcome

pytestmark = pytest.mark.integration


def test_a_session_history_comes_back_in_order_with_its_json_diff(table: TableClient) -> None:
    trail = TableAuditTrail(table)
    edit = MessageEdit(
        "00000000000000000003",
        3,
        "ImportProduct",
        (Change("replace", "/payload/row/currency", "EURO", "EUR"),),
    )
    later = AuditEntry("job/1", "resolve", "ada@example.com", "2026-01-01T10:05:00+00:00", "dup")
    first = AuditEntry(
        "job/1",
        "edit-and-replay",
        "function key 1a2b3c4d",
        "2026-01-01T10:00:00+00:00",
        "currency typo",
        new_session_id="replay-1",
        edits=(edit,),
    )
    trail.record(later)
    trail.record(first)
    trail.record(AuditEntry("job/2", "resolve", "x", "2026-01-01T09:00:00+00:00", "other"))

    assert trail.history("job/1") == [first, later]
    assert trail.history("job/3") == []


def test_a_token_confirms_once_even_when_two_requests_present_it_together(
    table: TableClient,
) -> None:
    confirmations = TableConfirmations(table)
    selection = Selection(task="ProcessPayment", reason="PaymentProviderUnavailable")
    issued = confirmations.issue(
        "replay", selection, 3, digest_of(["a", "b", "c"]), expiry(datetime.now(UTC))
    )

    def redeem(_: int) -> str:
        try:
            return confirmations.redeem(issued.token).token
        except ConfirmationRefused:
            return "refused"

    with ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = list(pool.map(redeem, range(8)))

    assert sorted(outcomes) == sorted([issued.token] + ["refused"] * 7)
    with pytest.raises(ConfirmationRefused, match="unknown or was already used"):
        confirmations.redeem(issued.token)
    with pytest.raises(ConfirmationRefused):
        confirmations.redeem("no-such-token")


def test_an_entry_with_a_key_is_recorded_once_however_often_its_request_runs(
    table: TableClient,
) -> None:
    trail = TableAuditTrail(table)
    entry = AuditEntry("job/9", "resolve", "ada", "2026-01-01T10:00:00+00:00", "dup", key="k-1")

    for attempt in range(3):
        trail.record(replace(entry, at=f"2026-01-01T10:0{attempt}:00+00:00"))
    trail.record(replace(entry, key="k-2"))

    assert sorted((e.key, e.at) for e in trail.history("job/9")) == [
        ("k-1", "2026-01-01T10:00:00+00:00"),
        ("k-2", "2026-01-01T10:00:00+00:00"),
    ]


def test_an_order_number_leads_back_to_its_job(table: TableClient) -> None:
    numbers = TableOrderNumbers(table)
    first, second = numbers.allocate("job/a"), numbers.allocate("job/b")

    assert numbers.find_job(first) == "job/a"
    assert numbers.find_job(second) == "job/b"
    assert numbers.find_job("ORD-99999999") is None


def test_the_order_progress_table_reads_back_as_one_record_per_order(table: TableClient) -> None:
    progress = TableOrderProgress(table)
    for job in ("o/1", "o/2", "o/3"):
        progress.accept(job, f"s-{job}", "t")
        progress.record(job, StepOutcome(1, "GenerateOrderNumber", "completed", None, job, "t"))
    progress.record("o/4", StepOutcome(1, "GenerateOrderNumber", "failed", "X", "o/4", "t"))

    records = progress.records(up_to=10)

    assert sorted(r.job_id for r in records) == ["o/1", "o/2", "o/3", "o/4"]
    assert all(len(r.steps) == 1 for r in records)
    assert len(progress.records(up_to=2)) == 2


def test_saved_import_manifests_can_be_listed(table: TableClient) -> None:
    store = TableManifestStore(table)
    for job in ("i/1", "i/2"):
        store.save(JobManifest(job, "imports", 3, 0, 3, {"s": 3}))

    assert sorted(m.job_id for m in store.list_manifests(up_to=10)) == ["i/1", "i/2"]
    assert len(store.list_manifests(up_to=1)) == 1
