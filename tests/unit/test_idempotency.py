"""Idempotency-Key semantics (the IETF httpapi draft) with the in-memory record store; each
race states its interleaving: a second request arrives at a named point of the first."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared.domain.errors import InvalidInput
from shared.domain.idempotency import (
    IdempotencyKeyInFlight,
    IdempotencyKeyReused,
    IdempotencyRecord,
    fingerprint,
    idempotency_key,
)
from shared.service_layer.idempotency import LEASE, IdempotentRequests
from tests.fakes import InMemoryIdempotencyRecords

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def records() -> InMemoryIdempotencyRecords:
    return InMemoryIdempotencyRecords()


@pytest.fixture
def requests(records: InMemoryIdempotencyRecords, clock: Clock) -> IdempotentRequests:
    return IdempotentRequests(records, clock=clock)


def counting(result: Mapping[str, Any]) -> tuple[list[int], Callable[[], Mapping[str, Any]]]:
    runs: list[int] = []

    def action() -> Mapping[str, Any]:
        runs.append(1)
        return result

    return runs, action


def test_the_same_key_and_body_gets_the_first_result_without_running_again(
    requests: IdempotentRequests,
) -> None:
    runs, action = counting({"job_id": "j-1"})

    first = requests.run("orders", "k", fingerprint({"a": 1}), action)
    again = requests.run("orders", "k", fingerprint({"a": 1}), action)

    assert first == again == {"job_id": "j-1"}
    assert len(runs) == 1


def test_the_same_key_with_another_body_is_refused_and_runs_nothing(
    requests: IdempotentRequests,
) -> None:
    runs, action = counting({"job_id": "j-1"})
    requests.run("orders", "k", fingerprint({"a": 1}), action)

    with pytest.raises(IdempotencyKeyReused, match="'k'"):
        requests.run("orders", "k", fingerprint({"a": 2}), action)

    assert len(runs) == 1


def test_a_key_belongs_to_its_scope(requests: IdempotentRequests) -> None:
    runs, action = counting({"ok": True})

    requests.run("replay:s-1", "k", fingerprint(False), action)
    requests.run("replay:s-2", "k", fingerprint(True), action)

    assert len(runs) == 2


def test_a_request_arriving_while_the_first_runs_is_refused_as_in_flight(
    requests: IdempotentRequests,
) -> None:
    seen: list[IdempotencyKeyInFlight] = []

    def first() -> Mapping[str, Any]:
        # Interleaving: the second request arrives while the first is running.
        with pytest.raises(IdempotencyKeyInFlight) as refused:
            requests.run("orders", "k", fingerprint({"a": 1}), lambda: {"second": True})
        seen.append(refused.value)
        return {"first": True}

    assert requests.run("orders", "k", fingerprint({"a": 1}), first) == {"first": True}
    assert len(seen) == 1 and seen[0].retryable


def test_a_different_body_while_the_first_runs_is_a_reuse_not_in_flight(
    requests: IdempotentRequests,
) -> None:
    def first() -> Mapping[str, Any]:
        with pytest.raises(IdempotencyKeyReused):
            requests.run("orders", "k", fingerprint({"a": 2}), lambda: {})
        return {"first": True}

    requests.run("orders", "k", fingerprint({"a": 1}), first)


def test_a_failed_request_releases_its_key_so_it_can_be_sent_again(
    requests: IdempotentRequests, records: InMemoryIdempotencyRecords
) -> None:
    def fails() -> Mapping[str, Any]:
        raise ConnectionError("service bus down")

    with pytest.raises(ConnectionError):
        requests.run("orders", "k", fingerprint({"a": 1}), fails)
    assert records.records == {}

    assert requests.run("orders", "k", fingerprint({"a": 1}), lambda: {"ok": 1}) == {"ok": 1}


def test_a_request_that_died_in_flight_is_taken_over_after_the_lease(
    requests: IdempotentRequests, records: InMemoryIdempotencyRecords, clock: Clock
) -> None:
    class Died(BaseException):
        pass

    def dies_without_releasing() -> Mapping[str, Any]:
        records.release = lambda *args: None  # type: ignore[method-assign]  # the worker is gone
        raise Died

    with pytest.raises(Died):
        requests.run("orders", "k", fingerprint({"a": 1}), dies_without_releasing)
    del records.release  # the store works again for the next worker

    clock.now = T0 + LEASE - timedelta(seconds=1)
    with pytest.raises(IdempotencyKeyInFlight):
        requests.run("orders", "k", fingerprint({"a": 1}), lambda: {"ok": 1})

    clock.now = T0 + LEASE
    taken_over = requests.run(
        "orders", "k", fingerprint({"a": 1}), lambda: {"ok": 2}, resume=lambda: {"resumed": 2}
    )
    assert taken_over == {"resumed": 2}  # what to do when the first may have run in part
    assert requests.run("orders", "k", fingerprint({"a": 1}), lambda: {"ok": 3}) == taken_over
    # A first request runs its action, not what resumes another's
    first = requests.run("orders", "k2", fingerprint({}), lambda: {"ok": 4}, resume=dict)
    assert first == {"ok": 4}


def test_of_two_requests_taking_over_one_stale_key_exactly_one_runs(
    records: InMemoryIdempotencyRecords, clock: Clock
) -> None:
    records.start("orders", "k", IdempotencyRecord("f", T0.isoformat()))  # died in flight
    clock.now = T0 + LEASE * 2
    first, second = (
        IdempotentRequests(records, clock=clock),
        IdempotentRequests(records, clock=clock),
    )
    ran: list[Any] = []
    take_over = records.take_over

    def second_overtakes(*args: Any) -> Any:
        # Interleaving: both read the stale record; the second takes it over and finishes
        # before the first's take-over is written.
        records.take_over = take_over  # type: ignore[method-assign]
        ran.append(second.run("orders", "k", "f", lambda: {"by": "second"}))
        return take_over(*args)

    records.take_over = second_overtakes  # type: ignore[method-assign, assignment]

    def first_action() -> Mapping[str, Any]:
        ran.append("first")
        return {}

    with pytest.raises(IdempotencyKeyInFlight):
        first.run("orders", "k", "f", first_action)

    assert ran == [{"by": "second"}]
    assert first.run("orders", "k", "f", lambda: {"by": "third"}) == {"by": "second"}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("abc-123", "abc-123"),
        ('"8e03978e-40d5-43e8-bc93-6894a57f9324"', "8e03978e-40d5-43e8-bc93-6894a57f9324"),
        ("  padded  ", "padded"),
    ],
)
def test_a_key_is_bare_or_a_structured_field_string(raw: str, expected: str) -> None:
    assert idempotency_key(raw, required=True) == expected


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (None, "is required"),
        ("", "must not be empty"),
        ("   ", "must not be empty"),
        ('""', "must not be empty"),
        ("a,b", "must hold one key"),
        ('"a", "b"', "must hold one key"),
        ('"a" b', "must hold one key"),
        ('"abc', "does not close"),
        ('"a\\nb"', 'escape only " and \\'),
        ("k" * 256, "at most 255 characters"),
        ("clé", "printable ASCII"),
        ("tab\there", "printable ASCII"),
    ],
)
def test_a_bad_key_is_refused_naming_the_header_and_the_rule(raw: str | None, problem: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        idempotency_key(raw, required=True)

    assert refused.value.field == "Idempotency-Key"
    assert problem in refused.value.problem


def test_an_optional_key_may_be_absent() -> None:
    assert idempotency_key(None, required=False) is None


@pytest.mark.parametrize("raw", ["", "  ", "a,b"])
def test_an_optional_key_that_is_sent_empty_blank_or_twice_is_refused(raw: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        idempotency_key(raw, required=False)

    assert refused.value.field == "Idempotency-Key"


def test_a_quoted_key_keeps_its_escaped_quote_and_backslash() -> None:
    assert idempotency_key('"a\\"b\\\\c,d"', required=True) == 'a"b\\c,d'
