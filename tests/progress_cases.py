"""What ``ImportProgress`` must count after a sequence of records: the same cases run against
the in-memory twin (tests/unit/test_import_progress_runs.py) and the Table Storage adapter on a
real Azurite (tests/integration/test_import_progress.py), so the two agree."""

from __future__ import annotations

from dataclasses import dataclass

from shared.service_layer.ports import ImportProgress

JOB = "job-r"
SESSION = "job-r-0000"
OTHER = "job-r-0001"

# (session, first step, last step): a run; (session, step, status): a row's own record.
Run = tuple[str, int, int]
Row = tuple[str, int, str]


@dataclass(frozen=True)
class Case:
    name: str
    records: tuple[Run | Row, ...]
    counts: dict[str, int]  # the job's
    session_counts: dict[str, int]  # SESSION's


def _run(session: str, first: int, last: int) -> Run:
    return (session, first, last)


def _row(session: str, step: int, status: str) -> Row:
    return (session, step, status)


CASES = (
    Case("a batch of 100 rows", (_run(SESSION, 1, 100),), {"imported": 100}, {"imported": 100}),
    Case(
        "a batch redelivered shorter, then the rest",
        (_run(SESSION, 1, 100), _run(SESSION, 1, 60), _run(SESSION, 61, 100)),
        {"imported": 100},
        {"imported": 100},
    ),
    Case(
        "a batch redelivered shorter, the rest not yet run",
        (_run(SESSION, 1, 100), _run(SESSION, 1, 60)),
        {"imported": 60},
        {"imported": 60},
    ),
    Case(
        "a batch redelivered longer",
        (_run(SESSION, 1, 40), _run(SESSION, 41, 60), _run(SESSION, 1, 100)),
        {"imported": 100},
        {"imported": 100},
    ),
    Case(
        "two runs around a failed row",
        (_run(SESSION, 1, 49), _row(SESSION, 50, "failed"), _run(SESSION, 51, 100)),
        {"imported": 99, "failed": 1},
        {"imported": 99, "failed": 1},
    ),
    Case(
        "the failed row imported on replay",
        (
            _run(SESSION, 1, 49),
            _row(SESSION, 50, "failed"),
            _run(SESSION, 51, 100),
            _row(SESSION, 50, "imported"),
        ),
        {"imported": 100},
        {"imported": 100},
    ),
    Case(
        "overlapping runs",
        (_run(SESSION, 1, 60), _run(SESSION, 41, 100), _run(SESSION, 30, 70), _run(SESSION, 2, 3)),
        {"imported": 100},
        {"imported": 100},
    ),
    Case(
        "rows run one by one inside a recorded run",
        (
            _run(SESSION, 1, 100),
            _row(SESSION, 1, "imported"),
            _row(SESSION, 2, "imported"),
            _row(SESSION, 3, "failed"),
        ),
        {"imported": 99, "failed": 1},
        {"imported": 99, "failed": 1},
    ),
    Case(
        "rows after a run, and a second session",
        (
            _run(SESSION, 1, 10),
            _row(SESSION, 11, "imported"),
            _run(OTHER, 1, 5),
            _row(OTHER, 3, "failed"),
            _row(OTHER, 9, "failed"),
        ),
        {"imported": 15, "failed": 2},
        {"imported": 11},
    ),
)


def record(progress: ImportProgress, case: Case) -> None:
    for session, step, third in case.records:
        if isinstance(third, str):
            progress.record(JOB, session, step, status=third, reason=None)
        else:
            progress.record_run(JOB, session, step, third)
