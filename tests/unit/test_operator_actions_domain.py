"""The rules of the console's actions that need no I/O: the JSON diff an edit is audited with,
the required note, and what a bulk confirmation still covers."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from shared.domain.audit import NOTE_MAX, Change, json_diff, required_note
from shared.domain.confirmations import (
    Confirmation,
    ConfirmationRefused,
    Selection,
    check,
    digest_of,
    expiry,
)
from shared.domain.errors import InvalidInput

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def test_the_diff_names_each_changed_added_and_removed_field_by_json_pointer() -> None:
    before = {"payload": {"row": {"currency": "EURO", "a/b": 1, "price": "9.80"}}, "step": 2}
    after = {"payload": {"row": {"currency": "EUR", "price": "9.80", "name": "Tea"}}, "step": 2}
    assert json_diff(before, after) == [
        Change("replace", "/payload/row/currency", old="EURO", new="EUR"),
        Change("remove", "/payload/row/a~1b", old=1),
        Change("add", "/payload/row/name", new="Tea"),
    ]
    assert json_diff(before, before) == []
    assert json_diff({"n": 1}, {"n": True}) == [Change("replace", "/n", old=1, new=True)]
    assert json_diff([1, 2], [1, 3]) == [Change("replace", "/1", old=2, new=3)]


@pytest.mark.parametrize("note", [None, "", "   ", "x" * (NOTE_MAX + 1), "bad \ud800 text"])
def test_a_note_is_required_bounded_and_valid_text(note: str | None) -> None:
    with pytest.raises(InvalidInput) as refused:
        required_note(note)
    assert refused.value.field == "note"


def test_a_note_is_kept_trimmed() -> None:
    assert required_note("  duplicate order, refunded by phone \n") == (
        "duplicate order, refunded by phone"
    )


def _confirmation(ids: list[str], *, expires: datetime) -> Confirmation:
    return Confirmation("t", "replay", Selection(), len(ids), digest_of(ids), expires.isoformat())


def test_a_confirmation_covers_the_same_sessions_in_any_order_before_it_expires() -> None:
    confirmation = _confirmation(["a", "b"], expires=NOW + timedelta(minutes=1))
    check(confirmation, "replay", ["b", "a"], NOW)


@pytest.mark.parametrize(
    ("action", "ids", "now", "says"),
    [
        ("resolve", ["a", "b"], NOW, "confirms a bulk replay"),
        ("replay", ["a", "b", "c"], NOW, "2 session(s) then, 3 now"),
        ("replay", ["a"], NOW, "2 session(s) then, 1 now"),
        ("replay", ["a", "b"], NOW + timedelta(minutes=2), "expired"),
    ],
)
def test_a_confirmation_refuses_another_action_another_selection_or_a_late_use(
    action: str, ids: list[str], now: datetime, says: str
) -> None:
    confirmation = _confirmation(["a", "b"], expires=NOW + timedelta(minutes=1))
    with pytest.raises(ConfirmationRefused, match=re.escape(says)):
        check(confirmation, action, ids, now)  # type: ignore[arg-type]


def test_a_token_lives_fifteen_minutes() -> None:
    assert expiry(NOW) == (NOW + timedelta(minutes=15)).isoformat()
