"""Where an order stands, from what was recorded of it: accepted, running at a step,
completed, failed (at which task, why), or replayed as a new session.

What is recorded: the order's acceptance, how each of its sessions ended (the session
outcomes: completed, or failed with the failure record the processor journals: the task, the
step, the reason), and the effects its tasks leave (an order number, a charge, a receipt
e-mail's record), which tell how far a session that has not ended got. Orders accepted by
earlier releases also have a row per step (``OrderRecord.steps``), which is read as well."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Literal

from .archive import FailureRecord, ReplayClaim
from .errors import NotFound
from .history import ReplayOutcome
from .reasons import SESSION_FAILED
from .receipt_emails import ReceiptEmail
from .session_outcomes import SessionOutcome

COMPLETED: Literal["completed"] = "completed"
FAILED: Literal["failed"] = "failed"


@dataclass(frozen=True)
class StepOutcome:
    """The latest outcome of one step of an order (a replayed step overwrites its first)."""

    step: int
    task: str
    status: Literal["completed", "failed"]
    reason: str | None
    session_id: str
    at: str


@dataclass(frozen=True)
class OrderRecord:
    job_id: str
    session_id: str | None  # None when the acceptance was not recorded (only steps were)
    accepted_at: str | None
    steps: tuple[StepOutcome, ...] = ()  # one per step, as earlier releases recorded them


def known_steps(
    record: OrderRecord,
    tasks: tuple[str, ...],
    sessions: Sequence[SessionOutcome] = (),
    failures: Mapping[str, FailureRecord] | None = None,
    *,
    done_by_effects: int = 0,
) -> OrderRecord:
    """``record`` with the latest outcome of each step that its sessions tell, in the order
    they ended: a completed session completed every step; a failed one completed the steps
    before the one its failure record (``failures``, by session id) names and failed that one
    (without a record: the first step not completed, with the session's reason). Steps up to
    ``done_by_effects`` (what the tasks' effects show done, in sessions that have not ended)
    count as completed when nothing else is known of them. Step rows of earlier releases
    are the start; what the sessions tell overrides them."""
    steps = {outcome.step: outcome for outcome in record.steps}
    session_id = record.session_id or record.job_id
    for step in range(1, min(done_by_effects, len(tasks)) + 1):
        if step not in steps:
            steps[step] = StepOutcome(step, tasks[step - 1], COMPLETED, None, session_id, "")
    for ended in sorted(sessions, key=lambda s: s.at):
        if ended.status == COMPLETED:
            last = len(tasks) + 1
        elif ended.status == FAILED:
            failure = (failures or {}).get(ended.session_id)
            if failure is not None and failure.step:
                last = min(failure.step, len(tasks))
            else:
                done = {s for s, o in steps.items() if o.status == COMPLETED}
                last = next((s for s in range(1, len(tasks) + 1) if s not in done), len(tasks))
            reason = failure.reason if failure is not None else ended.reason
            steps[last] = StepOutcome(
                last, tasks[last - 1], FAILED, reason, ended.session_id, ended.at
            )
        else:
            continue
        for step in range(1, last):
            steps[step] = StepOutcome(
                step, tasks[step - 1], COMPLETED, None, ended.session_id, ended.at
            )
    return replace(record, steps=tuple(steps[step] for step in sorted(steps)))


@dataclass(frozen=True)
class OrderStatus:
    job_id: str
    status: Literal["accepted", "running", "completed", "failed", "replayed"] = "accepted"
    next_step: int | None = None  # the step that runs next (accepted, running, replayed)
    next_task: str | None = None
    order_number: str | None = None
    total: str | None = None
    currency: str | None = None
    failed_task: str | None = None
    reason: str | None = None
    description: str | None = None
    session_id: str | None = None
    replayed_as: str | None = None  # the session a replay continues the order in
    # The failed session's replays, each with its outcome (a replay that failed again was
    # replayed in turn): filled in by the service, which reads them.
    replays: tuple[ReplayOutcome, ...] = ()
    # The receipt e-mail's record (sent, may have been sent, ...), once its task ran: filled
    # in by the service, which reads it.
    receipt_email: ReceiptEmail | None = None


class OrderNotFound(NotFound):
    title = "Unknown order"

    def __init__(self, job_id: str) -> None:
        super().__init__(
            f"There is no order {job_id!r}. Use the job_id that POST /api/orders returned."
        )
        self.job_id = job_id


def order_status(
    record: OrderRecord,
    tasks: tuple[str, ...],
    *,
    order_number: str | None,
    charged: tuple[Decimal, str] | None,
    failure: FailureRecord | None,
    claim: ReplayClaim | None,
) -> OrderStatus:
    """Completed when the last task completed; failed when a task failed (not merely
    ``SessionFailed``) and has not completed since; replayed when such a failure was claimed
    by a replay that has not got past it yet; else running at the first step not completed."""
    steps = {outcome.step: outcome for outcome in record.steps}
    done = {step for step, outcome in steps.items() if outcome.status == COMPLETED}
    total, currency = (str(charged[0]), charged[1]) if charged else (None, None)
    if failure is not None:
        total = total or _text(failure.context.get("total"))
        order_number = order_number or _text(failure.context.get("order_number"))
    base = OrderStatus(
        record.job_id,
        order_number=order_number,
        total=total,
        currency=currency,
        session_id=record.session_id,
        replayed_as=claim.new_session_id if claim else None,
    )
    if len(tasks) in done:
        return replace(base, status=COMPLETED)
    next_step = next(step for step in range(1, len(tasks) + 1) if step not in done)
    failed = [
        outcome
        for step, outcome in sorted(steps.items())
        if outcome.status == FAILED and outcome.reason != SESSION_FAILED
    ]
    if failed:
        first = failed[0]
        cause = failure if failure and failure.step == first.step else None
        # A replay that has not run the failed step yet; once it has, its outcome counts.
        replaying = claim is not None and first.session_id != claim.new_session_id
        return replace(
            base,
            status="replayed" if replaying else FAILED,
            next_step=first.step if replaying else None,
            next_task=first.task if replaying else None,
            failed_task=first.task,
            reason=first.reason,
            description=cause.description if cause else None,
        )
    return replace(
        base,
        status="running" if done else "accepted",
        next_step=next_step,
        next_task=tasks[next_step - 1],
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
