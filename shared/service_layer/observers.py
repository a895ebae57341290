"""What the processors tell about each message they settle, recorded for the status routes:
the outcome of each import row (GET /api/imports/{job_id}), and, while a release before this
one runs beside it, the end of each order as the step row that release reads its status from.
Each observer runs before the message is settled, so an outcome is recorded before it is final,
and re-recorded (an upsert) when the message comes again."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..domain.envelope import TaskMessage
from ..domain.order_status import COMPLETED, FAILED, StepOutcome
from ..domain.reasons import SESSION_FAILED
from .clock import Clock, utc_now
from .ports import ImportProgress, OrderProgress, RowOutcome
from .session_messages import IncomingMessage, Observer, Outcome, Told

IMPORTED = "imported"
ROW_FAILED = "failed"


@dataclass(frozen=True)
class Observed:
    """One settled message as the observers record it."""

    incoming: IncomingMessage
    job_id: str
    step: int | None
    task: str | None
    outcome: Outcome
    reason: str | None

    @property
    def completed(self) -> bool:
        return self.outcome is Outcome.COMPLETED

    @property
    def dead_lettered(self) -> bool:
        return self.outcome is Outcome.DEAD_LETTERED


def import_progress_observer(progress: ImportProgress) -> ImportProgressObserver:
    """Records each row's outcome (a batch's rows in as few calls as it can). A redelivery of a
    finished row records nothing; a re-recorded row overwrites itself (upsert), and so does
    its replay, so counts stay exact."""
    return ImportProgressObserver(progress)


class ImportProgressObserver:
    """A ``BatchObserver``: one row through ``ImportProgress.record``; of a batch, each run of
    2 or more imported rows of one session with consecutive steps through ``record_run`` (one
    record, replaced when the batch is redelivered from the same row), the other rows through
    ``record_many`` (or ``record`` when one). Replayed rows are never part of a run: each
    overwrites its own row's record in its original session, which is how a row that failed
    and then imported on replay counts once, as imported."""

    def __init__(self, progress: ImportProgress) -> None:
        self._progress = progress

    def __call__(
        self,
        incoming: IncomingMessage,
        message: TaskMessage | None,
        outcome: Outcome,
        reason: str | None,
    ) -> None:
        self.many([(incoming, message, outcome, reason)])

    def many(self, told: Sequence[Told]) -> None:
        rows: list[tuple[int, RowOutcome]] = []  # (its place in told, the row)
        runs: list[_Run] = []
        for index, seen in enumerate(_seen(told)):
            row = _row_outcome(seen)
            step = row.step
            if step is None or not seen.completed or _replayed(seen):
                rows.append((index, row))
            elif runs and runs[-1].continues(row, step):
                runs[-1].last_step = step
            else:
                runs.append(_Run(index, row, step, step))
        for run in runs:
            if run.first_step == run.last_step:
                rows.append((run.index, run.first))
            else:
                self._progress.record_run(
                    run.first.job_id, run.first.session_id, run.first_step, run.last_step
                )
        # In told's order, so a row given twice keeps its last outcome.
        ordered = [row for _, row in sorted(rows, key=lambda placed: placed[0])]
        if len(ordered) == 1:
            row = ordered[0]
            self._progress.record(
                row.job_id, row.session_id, row.step, status=row.status, reason=row.reason
            )
        elif ordered:
            self._progress.record_many(ordered)


@dataclass
class _Run:
    """Consecutive imported rows of one session, as ``ImportProgressObserver.many`` gathers
    them."""

    index: int  # of its first row in told
    first: RowOutcome
    first_step: int
    last_step: int

    def continues(self, row: RowOutcome, step: int) -> bool:
        return (row.job_id, row.session_id) == (
            self.first.job_id,
            self.first.session_id,
        ) and step == self.last_step + 1


def _replayed(seen: Observed) -> bool:
    return bool(seen.incoming.application_properties.get("replay_of"))


def _row_outcome(seen: Observed) -> RowOutcome:
    # A replayed row (replay_of: its original session) overwrites its first outcome, so a
    # row that failed and then imported on replay counts once, as imported.
    original = seen.incoming.application_properties.get("replay_of")
    return RowOutcome(
        seen.job_id,
        original if isinstance(original, str) and original else seen.incoming.session_id,
        seen.step,
        IMPORTED if seen.completed else ROW_FAILED,
        seen.reason,
    )


def _seen(told: Sequence[Told]) -> list[Observed]:
    """What the observers record of ``told``: redeliveries of finished work (nothing new
    happened) and messages that name no job left out."""
    seen = []
    for incoming, message, outcome, reason in told:
        if outcome is Outcome.ALREADY_DONE:
            continue
        routing = _routing(incoming, message)
        if routing is not None:
            job_id, step, task = routing
            seen.append(Observed(incoming, job_id, step, task, outcome, reason))
    return seen


def order_end_observer(
    progress: OrderProgress, *, last_step: int, clock: Clock = utc_now
) -> Observer:
    """Records an order's end as the one step row a release before this one needs to read
    its status: the failed step (dead-lettered for its own reason, not ``SessionFailed``), or
    the last step completed. One write an order; the steps between are not recorded."""

    def record(seen: Observed) -> None:
        failed = seen.dead_lettered and seen.reason != SESSION_FAILED
        if seen.step is None or not (failed or (seen.completed and seen.step == last_step)):
            return
        progress.record(
            seen.job_id,
            StepOutcome(
                step=seen.step,
                task=seen.task or "",
                status=COMPLETED if seen.completed else FAILED,
                reason=seen.reason,
                session_id=seen.incoming.session_id,
                at=clock().isoformat(),
            ),
        )

    return _observer(record)


def _observer(record: Callable[[Observed], None]) -> Observer:
    """An observer that leaves out redeliveries of finished work (nothing new happened) and
    messages that name no job, and hands the rest to ``record``."""

    def observe(
        incoming: IncomingMessage,
        message: TaskMessage | None,
        outcome: Outcome,
        reason: str | None,
    ) -> None:
        for seen in _seen([(incoming, message, outcome, reason)]):
            record(seen)

    return observe


def _routing(
    incoming: IncomingMessage, message: TaskMessage | None
) -> tuple[str, int | None, str | None] | None:
    """(job id, step, task) from the message, else from its application properties."""
    if message is not None:
        return message.job_id, message.step, message.task
    properties = incoming.application_properties
    job_id, step, task = properties.get("job_id"), properties.get("step"), properties.get("task")
    if not isinstance(job_id, str):
        return None
    return (
        job_id,
        step if isinstance(step, int) and not isinstance(step, bool) else None,
        task if isinstance(task, str) else None,
    )
