"""A batch's imported rows recorded as runs (``ImportProgressObserver.many``), and how the
in-memory twin counts runs and rows' own records (the cases of tests/progress_cases.py, which
the Table Storage adapter passes too)."""

from __future__ import annotations

from typing import Any

import pytest

from shared.domain.pipelines import import_message
from shared.service_layer.observers import import_progress_observer
from shared.service_layer.processor import IncomingMessage, Outcome
from shared.service_layer.session_messages import Told
from tests.fakes import InMemoryImportProgress
from tests.progress_cases import CASES, JOB, SESSION, Case, record


class RecordingProgress(InMemoryImportProgress):
    """The twin, and each call made to it."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[Any, ...]] = []

    def record(self, job_id: str, session_id: str, step: int | None, **kwargs: Any) -> None:
        self.calls.append(("record", session_id, step, kwargs["status"]))
        super().record(job_id, session_id, step, **kwargs)

    def record_many(self, rows: Any) -> None:
        self.calls.append(("record_many", [(r.session_id, r.step, r.status) for r in rows]))
        for r in rows:  # not through self.record, which would note a call per row
            InMemoryImportProgress.record(
                self, r.job_id, r.session_id, r.step, status=r.status, reason=r.reason
            )

    def record_run(self, job_id: str, session_id: str, first_step: int, last_step: int) -> None:
        self.calls.append(("record_run", session_id, first_step, last_step))
        super().record_run(job_id, session_id, first_step, last_step)


def told(
    step: int,
    outcome: Outcome = Outcome.COMPLETED,
    *,
    session: str = SESSION,
    replay_of: str | None = None,
) -> Told:
    message = import_message(JOB, step, is_last=False, row={"sku": f"SKU-{step}"})
    properties = dict(message.application_properties())
    if replay_of:
        properties["replay_of"] = replay_of
    incoming = IncomingMessage(message.to_json(), session, application_properties=properties)
    failed = outcome is Outcome.DEAD_LETTERED
    return (incoming, message, outcome, "InvalidProduct:price" if failed else None)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_the_twin_counts_each_row_once(case: Case) -> None:
    progress = InMemoryImportProgress()

    record(progress, case)

    assert progress.counts(JOB) == case.counts
    assert progress.counts(JOB, session_id=SESSION) == case.session_counts


def test_a_batch_of_100_imported_rows_is_one_run() -> None:
    progress = RecordingProgress()

    import_progress_observer(progress).many([told(step) for step in range(1, 101)])

    assert progress.calls == [("record_run", SESSION, 1, 100)]
    assert progress.counts(JOB) == {"imported": 100}


def test_a_single_row_a_failed_row_and_rows_already_done_are_recorded_as_before() -> None:
    progress = RecordingProgress()
    observer = import_progress_observer(progress)

    observer.many([told(1)])
    observer(*told(2, Outcome.DEAD_LETTERED))
    observer.many([told(1, Outcome.ALREADY_DONE), told(2, Outcome.ALREADY_DONE)])

    assert progress.calls == [("record", SESSION, 1, "imported"), ("record", SESSION, 2, "failed")]
    assert progress.counts(JOB) == {"imported": 1, "failed": 1}


def test_runs_break_at_a_gap_a_failure_or_another_session_and_a_lone_row_stays_a_row() -> None:
    progress = RecordingProgress()

    import_progress_observer(progress).many(
        [
            told(1),
            told(2),
            told(3, Outcome.DEAD_LETTERED),
            told(4),
            told(5),
            told(6),
            told(8),  # a gap
            told(9, session="job-r-0001"),
            told(10, session="job-r-0001"),
        ]
    )

    assert progress.calls == [
        ("record_run", SESSION, 1, 2),
        ("record_run", SESSION, 4, 6),
        ("record_run", "job-r-0001", 9, 10),
        ("record_many", [(SESSION, 3, "failed"), (SESSION, 8, "imported")]),
    ]
    assert progress.counts(JOB) == {"imported": 8, "failed": 1}


def test_replayed_rows_overwrite_their_own_records_in_their_original_session() -> None:
    # Given a session whose row 3 failed between two runs
    progress = RecordingProgress()
    observer = import_progress_observer(progress)
    observer.many([told(1), told(2)])
    observer(*told(3, Outcome.DEAD_LETTERED))
    observer.many([told(4), told(5)])
    progress.calls.clear()

    # When its rows 3 to 5 are replayed in a session of their own, and import
    observer.many([told(step, session="replay-1", replay_of=SESSION) for step in (3, 4, 5)])

    # Then each replayed row is recorded on its own, under the original session, and row 3
    # counts once, as imported
    assert progress.calls == [
        (
            "record_many",
            [(SESSION, 3, "imported"), (SESSION, 4, "imported"), (SESSION, 5, "imported")],
        )
    ]
    assert progress.counts(JOB) == {"imported": 5}
    assert progress.counts(JOB, session_id="replay-1") == {}
