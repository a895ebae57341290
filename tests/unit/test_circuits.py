"""A pipeline's circuit and gate: when a run of transient failures pauses it, who may run while
it is paused (one probe at a time, each a backoff after the last failed one), what closes it,
and an operator's pause read at most once per its time to live."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from shared.domain.errors import SERVICE_BUS, ServiceUnavailable
from shared.domain.pauses import ManualPause
from shared.domain.retries import RetryPolicy
from shared.service_layer.circuits import PROBE_TIMEOUT_SECONDS, Circuit, Gates, PipelineGate
from tests.fakes import FakeTime, InMemoryPipelinePauses

NOW = datetime(2026, 11, 27, 12, 3, 10, tzinfo=UTC)
TABLES = "Table Storage"


def circuit(time: FakeTime, threshold: int = 3) -> Circuit:
    return Circuit(
        "purchase",
        threshold=threshold,
        probes=RetryPolicy(min_backoff=1, max_backoff=4),
        clock=time.now,
        monotonic=time.monotonic,
    )


def test_failures_in_a_row_from_two_sessions_open_it_and_say_what_and_since_when(
    caplog: pytest.LogCaptureFixture,
) -> None:
    time = FakeTime(NOW)
    c = circuit(time)
    caplog.set_level(logging.INFO, logger="shared.service_layer.circuits")

    for session in ("s-1", "s-1", "s-2"):
        assert c.state() is None
        c.failed(session, TABLES)

    paused = c.state()
    assert paused is not None
    assert (paused.cause, paused.dependency, paused.since) == ("circuit", TABLES, NOW.isoformat())
    assert (
        f'pipeline=purchase paused cause=circuit dependency="{TABLES}" since={NOW.isoformat()}'
        in caplog.text
    )


def test_one_session_failing_alone_does_not_pause_the_others() -> None:
    c = circuit(FakeTime(NOW))
    for _ in range(10):
        c.failed("bad-card", "the payment provider")
    assert c.state() is None


def test_a_success_in_between_starts_the_count_again() -> None:
    c = circuit(FakeTime(NOW))
    c.failed("s-1", TABLES)
    c.failed("s-2", TABLES)
    c.succeeded("s-3")
    c.failed("s-4", TABLES)
    assert c.state() is None


def test_a_failure_that_names_no_dependency_says_nothing_of_an_outage() -> None:
    c = circuit(FakeTime(NOW))
    for session in ("s-1", "s-2", "s-3", "s-4"):
        c.failed(session, None)
    assert c.state() is None


def test_while_open_one_probe_at_a_time_each_a_backoff_after_the_last_failed() -> None:
    time = FakeTime(NOW)
    c = circuit(time, threshold=2)
    c.failed("s-1", TABLES)
    c.failed("s-2", TABLES)

    assert not c.admit("s-3")  # the first probe is due one backoff (1 s) after it opened
    time.advance(1)
    assert c.admit("s-3")  # s-3 probes
    assert c.admit("s-3") and not c.admit("s-4")  # one at a time
    c.failed("s-3", TABLES)  # the probe failed: the next is due 2 s later
    time.advance(1.5)
    assert not c.admit("s-4")
    time.advance(0.5)
    assert c.admit("s-4")
    c.succeeded("s-4")
    assert c.state() is None and c.admit("s-5") and c.admit("s-6")


def test_a_probe_that_never_reports_back_lets_another_go_after_a_while() -> None:
    time = FakeTime(NOW)
    c = circuit(time, threshold=2)
    c.failed("s-1", TABLES)
    c.failed("s-2", TABLES)
    time.advance(1)
    assert c.admit("dies")
    time.advance(PROBE_TIMEOUT_SECONDS)
    assert c.admit("s-3")


def test_open_on_service_bus_a_task_success_is_not_enough_a_request_to_it_closes_it() -> None:
    c = circuit(FakeTime(NOW), threshold=2)
    c.failed("s-1", SERVICE_BUS)
    c.failed("s-2", SERVICE_BUS)

    c.succeeded("s-3")  # its task ran: Storage answers, Service Bus may not
    assert c.state() is not None
    c.reached(SERVICE_BUS)
    assert c.state() is None


def test_an_operators_pause_holds_every_session_and_is_read_once_per_its_time_to_live() -> None:
    time = FakeTime(NOW)
    pauses = InMemoryPipelinePauses()
    gate = PipelineGate(circuit(time), pauses, pause_ttl=5, monotonic=time.monotonic)
    assert gate.admit("s-1") and pauses.reads == 1

    pauses.pause(
        "purchase",
        ManualPause("ada@example.com", "maintenance", "2026-11-27T12:03:10.250000+00:00"),
    )
    assert gate.admit("s-1")  # read 0 s ago: not seen yet
    time.advance(5)
    assert not gate.admit("s-1") and not gate.admit("s-2")
    paused = gate.paused()
    assert (
        paused is not None
        and paused.summary
        == "paused by ada@example.com since 2026-11-27T12:03:10+00:00: maintenance"
    )
    assert pauses.reads == 2


class Unreachable(InMemoryPipelinePauses):
    def find(self, pipeline: str) -> ManualPause | None:
        raise ServiceUnavailable(TABLES, "ServiceRequestError")


def test_a_pause_store_out_of_reach_keeps_what_was_read_last() -> None:
    time = FakeTime(NOW)
    stored = InMemoryPipelinePauses()
    stored.pause(
        "purchase",
        ManualPause("ada@example.com", "maintenance", "2026-11-27T12:03:10.250000+00:00"),
    )
    gate = PipelineGate(circuit(time), stored, pause_ttl=5, monotonic=time.monotonic)
    assert not gate.admit("s-1")

    gate._pauses = Unreachable()
    time.advance(10)

    assert not gate.admit("s-1")  # still paused, as last read
    assert Gates([gate]).readings() == {"purchase": ("manual", "")}
