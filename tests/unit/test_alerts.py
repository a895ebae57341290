"""The alert conditions the overview shows (``shared.service_layer.alerts``), each holding or
not at a given time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from shared.domain.alerts import AlertRules, TimerRun
from shared.service_layer.alerts import current_alerts

NOW = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
RULES = AlertRules(
    dead_letter_wait_seconds=600, failed_sessions_threshold=5, failed_sessions_window_minutes=15
)
PIPELINES = {"purchase": "purchase-tasks", "product_import": "product-import-tasks"}


def _at(seconds_ago: float) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).isoformat()


def _alerts(**given: object) -> list[tuple[str, str]]:
    found = current_alerts(
        RULES,
        now=NOW,
        waiting=given.get("waiting", {}),  # type: ignore[arg-type]
        archive_run=given.get("run"),  # type: ignore[arg-type]
        failed_recently=given.get("failed", {}),  # type: ignore[arg-type]
        pipelines=PIPELINES,
        paused=given.get("paused"),  # type: ignore[arg-type]
    )
    return [(alert.kind, alert.subject) for alert in found]


def test_nothing_holds_when_the_archive_empties_the_queues_and_few_sessions_fail() -> None:
    run = TimerRun("archive_dead_letters", last_succeeded_at=_at(5), last_drained_at=_at(10))
    assert _alerts(waiting={"purchase-tasks": 3}, run=run, failed={"purchase-tasks": 5}) == []


def test_dead_letters_wait_too_long_when_no_run_emptied_the_queues_in_the_allowed_time() -> None:
    run = TimerRun("archive_dead_letters", last_succeeded_at=_at(5), last_drained_at=_at(601))
    waiting = {"purchase-tasks": 3, "product-import-tasks": 0}
    assert _alerts(waiting=waiting, run=run) == [("dead_letters_waiting", "purchase-tasks")]
    assert _alerts(waiting=waiting, run=None) == [("dead_letters_waiting", "purchase-tasks")]
    assert _alerts(waiting={"purchase-tasks": 0}, run=run) == []


def test_failed_sessions_over_the_threshold_in_the_window_name_their_pipeline() -> None:
    assert _alerts(failed={"purchase-tasks": 6, "product-import-tasks": 5}) == [
        ("failed_sessions", "purchase")
    ]


def test_the_archive_timer_fails_when_its_latest_run_failed() -> None:
    failing = TimerRun(
        "archive_dead_letters",
        last_succeeded_at=_at(60),
        last_drained_at=_at(60),
        last_failed_at=_at(1),
        last_error="ServiceUnavailable: Table Storage could not be reached",
    )
    recovered = TimerRun(
        "archive_dead_letters",
        last_succeeded_at=_at(1),
        last_drained_at=_at(1),
        last_failed_at=_at(60),
    )
    assert _alerts(run=failing) == [("archive_timer_failing", "archive_dead_letters")]
    assert _alerts(run=recovered) == []


def test_a_pipeline_paused_by_its_circuit_is_an_alert_and_one_paused_by_hand_is_not() -> None:
    circuit = {"cause": "circuit", "dependency": "Table Storage", "since": _at(30)}
    manual = {"cause": "manual", "dependency": None, "since": _at(30), "by": "ada"}
    paused = {"purchase": circuit, "product_import": manual}
    assert _alerts(paused=paused) == [("pipeline_paused", "purchase")]
    assert _alerts(paused={"purchase": None}) == []
