"""The console's records on Azurite: the audit trail of a session in the order things happened,
and confirmation tokens that confirm one action only, even when presented twice at once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest
from azure.data.tables import TableClient

from shared.adapters.table_audit import TableAuditTrail
from shared.adapters.table_confirmations import TableConfirmations
from shared.domain.audit import AuditEntry, Change, MessageEdit
from shared.domain.confirmations import ConfirmationRefused, Selection, digest_of, expiry

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
        "bulk-replay", selection, 3, digest_of(["a", "b", "c"]), expiry(datetime.now(UTC))
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
