"""Every row of docs/processor.md, under both policies where the row says "both", with no
delivery count from the trigger (``delivery_count=None``, as Azure's Python binding gives it):
the processor counts attempts in the session state. Time is a ``FakeTime``: it moves only
when the processor sleeps (waiting, holding its session)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from shared.domain.envelope import TaskMessage
from shared.domain.errors import PermanentTaskError, ServiceUnavailable, TransientTaskError
from shared.domain.pauses import ManualPause
from shared.domain.session_state import Attempts, Failure, SessionState, decode_session_state
from shared.service_layer.circuits import Circuit, PipelineGate
from shared.service_layer.processor import (
    FailurePolicy,
    IncomingMessage,
    Outcome,
    RetryPolicy,
    SessionProcessor,
    TaskInvocation,
)
from tests.fakes import FakeTime, InMemoryPipelinePauses, InMemorySessionActions

STOP = FailurePolicy.STOP_ON_FAILURE
CONTINUE = FailurePolicy.CONTINUE_ON_FAILURE
BOTH = pytest.mark.parametrize("policy", [STOP, CONTINUE], ids=["stop", "continue"])
NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


class Tasks:
    """Tasks whose behaviour a test sets per name (an outcome, or a list of outcomes, one per
    call, the last one repeated); they record every call, and when (``at``)."""

    def __init__(self, time: FakeTime | None = None) -> None:
        self.calls: list[TaskInvocation] = []
        self.at: list[float] = []
        self.behaviour: dict[str, Any] = {}
        self.time = time

    def make(self, name: str):
        def task(call: TaskInvocation) -> dict[str, Any]:
            self.calls.append(call)
            self.at.append(self.time.monotonic() if self.time else 0.0)
            behaviour = self.behaviour.get(name)
            if isinstance(behaviour, list):
                calls = sum(1 for c in self.calls if c.message.task == name)
                behaviour = behaviour[min(calls, len(behaviour)) - 1]
            if isinstance(behaviour, BaseException):
                raise behaviour
            return behaviour if isinstance(behaviour, dict) else {f"{name}_done": True}

        return task

    def ran(self) -> list[str]:
        return [call.message.task for call in self.calls]


TASK_NAMES = ("A", "B", "C")


def make_processor(
    policy: FailurePolicy,
    tasks: Tasks,
    *,
    hold_seconds: float = 300.0,
    gate: PipelineGate | None = None,
    observer: Any = None,
    **retry: Any,
) -> tuple[SessionProcessor, FakeTime]:
    """A processor of the tasks A, B, C whose retry window is 3 s (backoff 0.5, 1, 1.5 s)
    unless ``retry`` says otherwise; its time a ``FakeTime`` shared with ``tasks``."""
    time = tasks.time = tasks.time or FakeTime(NOW)
    processor = SessionProcessor(
        pipeline="demo",
        tasks={name: tasks.make(name) for name in TASK_NAMES},
        policy=policy,
        retry=RetryPolicy(**({"window": 3.0, "min_backoff": 0.5, "max_backoff": 1.5} | retry)),
        sleep=time.sleep,
        clock=time.now,
        monotonic=time.monotonic,
        gate=gate,
        hold_seconds=hold_seconds,
        observer=observer,
    )
    return processor, time


def message(step: int, *, task: str | None = None, is_last: bool | None = None) -> TaskMessage:
    return TaskMessage(
        job_id="job-1",
        pipeline="demo",
        task=task or TASK_NAMES[step - 1],
        step=step,
        is_last=step == len(TASK_NAMES) if is_last is None else is_last,
        payload={"n": step},
    )


def incoming(
    msg: TaskMessage | bytes, *, delivery_count: int | None = None, props: dict | None = None
) -> IncomingMessage:
    body = msg if isinstance(msg, bytes) else msg.to_json()
    properties = (
        props
        if props is not None
        else ({} if isinstance(msg, bytes) else msg.application_properties())
    )
    return IncomingMessage(
        body=body,
        session_id="s-1",
        delivery_count=delivery_count,
        application_properties=properties,
    )


def running(next_step: int, **changes: Any) -> bytes:
    completed = tuple(TASK_NAMES[: next_step - 1])
    return SessionState(next_step=next_step, completed=completed, **changes).to_bytes()


def failed_at(step: int, reason: str = "PaymentDeclined") -> bytes:
    state = SessionState(next_step=step, completed=tuple(TASK_NAMES[: step - 1])).mark_failed(
        Failure(TASK_NAMES[step - 1], step, reason, "card refused", NOW.isoformat())
    )
    return state.to_bytes()


def state_of(actions: InMemorySessionActions) -> SessionState | None:
    return decode_session_state(actions.state)


def assert_state_written_before_settlement(actions: InMemorySessionActions) -> None:
    settle = next(i for i, e in enumerate(actions.events) if e != "set_state")
    assert "set_state" in actions.events[:settle]
    assert settle == len(actions.events) - 1


# R1 -------------------------------------------------------------------------------------------
@BOTH
def test_r1_first_step_without_state_runs_and_creates_state(policy: FailurePolicy) -> None:
    tasks = Tasks()
    tasks.behaviour["A"] = {"order_number": "ORD-1"}
    processor, _ = make_processor(policy, tasks)
    actions = InMemorySessionActions()

    result = processor.handle(incoming(message(1)), actions)

    assert result.outcome is Outcome.COMPLETED
    assert actions.settlements == [("complete",)]
    state = state_of(actions)
    assert state is not None
    assert (state.status, state.next_step, state.completed) == ("running", 2, ("A",))
    assert state.context == {"order_number": "ORD-1"}
    assert_state_written_before_settlement(actions)


# R2 -------------------------------------------------------------------------------------------
@BOTH
def test_r2_next_step_runs_with_earlier_context_and_merges_outputs(policy: FailurePolicy) -> None:
    tasks = Tasks()
    tasks.behaviour["B"] = {"total": "10.00"}
    processor, _ = make_processor(policy, tasks)
    actions = InMemorySessionActions(
        state=running(2, context={"order_number": "ORD-1"}, processed=1)
    )

    result = processor.handle(incoming(message(2)), actions)

    assert result.outcome is Outcome.COMPLETED
    assert tasks.calls[0].context == {"order_number": "ORD-1"}
    state = state_of(actions)
    assert state is not None
    assert state.next_step == 3
    assert state.completed == ("A", "B")
    assert state.context == {"order_number": "ORD-1", "total": "10.00"}
    assert state.processed == 2
    assert_state_written_before_settlement(actions)


# R3 -------------------------------------------------------------------------------------------
@BOTH
def test_r3_last_message_clears_the_state(policy: FailurePolicy) -> None:
    tasks = Tasks()
    processor, _ = make_processor(policy, tasks)
    actions = InMemorySessionActions(state=running(3))

    result = processor.handle(incoming(message(3)), actions)

    assert result.outcome is Outcome.COMPLETED
    assert tasks.ran() == ["C"]
    assert actions.state is None
    # Written, settled, then cleared (R5) and the session released.
    assert actions.state_writes[-1] is None and len(actions.state_writes) == 2
    assert actions.events == ["set_state", "complete", "set_state", "release_session"]


# R4 -------------------------------------------------------------------------------------------
@BOTH
def test_r4_redelivered_step_already_done_is_completed_without_running(
    policy: FailurePolicy,
) -> None:
    tasks = Tasks()
    processor, _ = make_processor(policy, tasks)
    before = running(3)
    actions = InMemorySessionActions(state=before)

    result = processor.handle(incoming(message(2)), actions)

    assert result.outcome is Outcome.ALREADY_DONE
    assert tasks.calls == []
    assert actions.settlements == [("complete",)]
    assert actions.state == before
    assert actions.state_writes == []


# R5 -------------------------------------------------------------------------------------------
class CrashOnComplete(InMemorySessionActions):
    """The worker dies after writing the state, before the completion reaches Service Bus."""

    def __init__(self, state: bytes | None) -> None:
        super().__init__(state=state)
        self.crashes = 1

    def complete(self) -> None:
        if self.crashes:
            self.crashes -= 1
            raise ConnectionError("worker died")
        super().complete()


@BOTH
def test_r5_a_last_message_redelivered_after_it_ran_is_completed_and_ends_the_session(
    policy: FailurePolicy,
) -> None:
    tasks = Tasks()
    processor, _ = make_processor(policy, tasks)
    actions = CrashOnComplete(state=running(3))

    with pytest.raises(ConnectionError):
        processor.handle(incoming(message(3)), actions)
    state = state_of(actions)
    assert state is not None and state.next_step == 4  # written, not cleared, before the crash
    result = processor.handle(incoming(message(3)), actions)

    assert result.outcome is Outcome.ALREADY_DONE
    assert tasks.ran() == ["C"]  # once
    assert actions.settlements == [("complete",)]
    assert actions.state is None
    assert actions.events[-3:] == ["complete", "set_state", "release_session"]


@BOTH
def test_r5_the_last_message_clears_the_state_only_after_it_is_settled(
    policy: FailurePolicy,
) -> None:
    tasks = Tasks()
    processor, _ = make_processor(policy, tasks)
    actions = InMemorySessionActions(state=running(3))

    processor.handle(incoming(message(3)), actions)

    assert actions.events == ["set_state", "complete", "set_state", "release_session"]
    assert actions.state_writes[-1] is None


def test_r5_no_state_and_a_last_message_is_an_earlier_step_missing() -> None:
    # Without a delivery count, no state and the last message cannot be told apart from a
    # session whose earlier messages vanished; the state is cleared only after the last
    # message is settled, so it is the latter unless Service Bus delivered a completed
    # message again, and the description says so.
    tasks = Tasks()
    processor, _ = make_processor(STOP, tasks)
    actions = InMemorySessionActions(state=None)

    result = processor.handle(incoming(message(3)), actions)

    assert result.reason == "PreviousStepMissing"
    assert result.description is not None and "no state at all" in result.description
    assert tasks.calls == []
    assert actions.state is None and actions.released


def test_r5_no_state_and_a_last_message_runs_under_continue_on_failure() -> None:
    tasks = Tasks()
    processor, _ = make_processor(CONTINUE, tasks)
    actions = InMemorySessionActions(state=None)

    result = processor.handle(incoming(message(3)), actions)

    assert result.outcome is Outcome.COMPLETED
    assert tasks.ran() == ["C"]  # an import row: upserting it again is harmless


# R6 / R7 --------------------------------------------------------------------------------------
def test_r6_step_ahead_fails_the_session_under_stop_on_failure() -> None:
    tasks = Tasks()
    processor, _ = make_processor(STOP, tasks)
    actions = InMemorySessionActions(state=running(1))

    result = processor.handle(incoming(message(2)), actions)

    assert result.outcome is Outcome.DEAD_LETTERED
    assert tasks.calls == []
    kind, reason, description = actions.last_settlement
    assert (kind, reason) == ("dead_letter", "PreviousStepMissing")
    assert "step 1 never ran" in description
    state = state_of(actions)
    assert state is not None and state.is_failed
    assert state.failure is not None
    assert (state.failure.task, state.failure.step, state.failure.reason) == (
        "B",
        2,
        "PreviousStepMissing",
    )
    assert state.failure.at == NOW.isoformat()
    assert_state_written_before_settlement(actions)


def test_r7_step_ahead_runs_under_continue_on_failure() -> None:
    tasks = Tasks()
    processor, _ = make_processor(CONTINUE, tasks)
    actions = InMemorySessionActions(state=running(1))

    result = processor.handle(incoming(message(2)), actions)

    assert result.outcome is Outcome.COMPLETED
    assert tasks.ran() == ["B"]
    state = state_of(actions)
    assert state is not None and state.next_step == 3


# R8 / R9 --------------------------------------------------------------------------------------
def test_r8_permanent_failure_marks_the_session_failed_and_dead_letters() -> None:
    tasks = Tasks()
    tasks.behaviour["B"] = PermanentTaskError("PaymentDeclined", "card tok_x was declined")
    processor, time = make_processor(STOP, tasks)
    actions = InMemorySessionActions(state=running(2))

    result = processor.handle(incoming(message(2)), actions)

    assert result.outcome is Outcome.DEAD_LETTERED
    assert actions.last_settlement == ("dead_letter", "PaymentDeclined", "card tok_x was declined")
    assert len(tasks.calls) == 1 and time.sleeps == []  # never retried
    state = state_of(actions)
    assert state is not None and state.is_failed
    assert state.failure is not None
    assert (state.failure.task, state.failure.step) == ("B", 2)
    assert_state_written_before_settlement(actions)


def test_r9_permanent_failure_under_continue_counts_and_goes_on() -> None:
    tasks = Tasks()
    tasks.behaviour["B"] = PermanentTaskError("InvalidProduct:price", "price is missing")
    processor, _ = make_processor(CONTINUE, tasks)
    actions = InMemorySessionActions(state=running(2, processed=1))

    result = processor.handle(incoming(message(2)), actions)

    assert actions.last_settlement[:2] == ("dead_letter", "InvalidProduct:price")
    assert result.outcome is Outcome.DEAD_LETTERED
    state = state_of(actions)
    assert state is not None
    assert (state.status, state.next_step, state.processed, state.failed) == ("running", 3, 2, 1)
    # ... and the next row runs.
    actions.settlements.clear()
    processor.handle(incoming(message(3)), actions)
    assert actions.settlements == [("complete",)]
    assert tasks.ran() == ["B", "C"]


# R10 - R13: transient failures waited out, holding the session --------------------------------
def transient(reason: str = "PaymentProviderUnavailable") -> TransientTaskError:
    return TransientTaskError(reason, "timeout", dependency="the payment provider")


@BOTH
def test_r10_transient_failure_is_waited_out_holding_the_session(policy: FailurePolicy) -> None:
    tasks = Tasks()
    tasks.behaviour["B"] = [transient(), transient(), {"paid": True}]
    processor, _time = make_processor(policy, tasks)
    actions = InMemorySessionActions(state=running(2))

    result = processor.handle(incoming(message(2)), actions)

    assert result.outcome is Outcome.COMPLETED and result.attempt == 3
    assert [call.attempt for call in tasks.calls] == [1, 2, 3]
    # exponential backoff between the attempts, waited within the one invocation
    assert [b - a for a, b in zip(tasks.at, tasks.at[1:], strict=False)] == [0.5, 1.0]
    # each failed attempt is counted in the state before its wait; never handed back
    assert actions.events == ["set_state", "set_state", "set_state", "complete"]
    assert actions.settlements == [("complete",)]
    written = [decode_session_state(state) for state in actions.state_writes]
    assert [w.attempts for w in written if w is not None] == [
        Attempts("B", 2, 1, NOW.isoformat()),
        Attempts("B", 2, 2, NOW.isoformat()),  # the window runs from the first failure
        None,
    ]


def test_r10_backoff_is_capped() -> None:
    policy = RetryPolicy(window=60, min_backoff=1, max_backoff=5)
    assert [policy.backoff(n) for n in (1, 2, 3, 4, 5, 100)] == [1, 2, 4, 5, 5, 5]


def test_r10_the_session_lock_is_renewed_while_it_waits() -> None:
    tasks = Tasks()
    tasks.behaviour["B"] = [transient(), {"paid": True}]
    processor, _ = make_processor(STOP, tasks, window=600, min_backoff=40, max_backoff=40)
    actions = InMemorySessionActions(state=running(2))

    result = processor.handle(incoming(message(2)), actions)

    assert result.outcome is Outcome.COMPLETED
    assert actions.renewals >= 2  # every 15 s until the host says how long the lock lasts


def test_r11_transient_failure_past_the_window_fails_the_session() -> None:
    tasks = Tasks()
    tasks.behaviour["B"] = transient()
    processor, _time = make_processor(STOP, tasks)
    actions = InMemorySessionActions(state=running(2))

    result = processor.handle(incoming(message(2)), actions)

    assert result.outcome is Outcome.DEAD_LETTERED
    kind, reason, description = actions.last_settlement
    assert (kind, reason) == ("dead_letter", "PaymentProviderUnavailable")
    # attempts at 0, 0.5, 1.5 and 3.0 s: the last at the window's end
    assert tasks.at == [0.0, 0.5, 1.5, 3.0]
    assert description.startswith(
        f"Gave up: the payment provider was out of reach for 3 s, since {NOW.isoformat()} "
        "(4 attempts; the retry window is 3 s). Last error: timeout"
    )
    state = state_of(actions)
    assert state is not None and state.is_failed
    assert state.failure is not None and state.failure.reason == "PaymentProviderUnavailable"
    assert actions.settlements == [actions.last_settlement]  # never handed back


def test_r12_transient_failure_past_the_window_under_continue_goes_on() -> None:
    tasks = Tasks()
    tasks.behaviour["B"] = TransientTaskError("StorageBusy", "503")
    processor, _ = make_processor(CONTINUE, tasks)
    actions = InMemorySessionActions(state=running(2))

    processor.handle(incoming(message(2)), actions)

    assert [s[0] for s in actions.settlements] == ["dead_letter"]
    assert actions.last_settlement[:2] == ("dead_letter", "StorageBusy")
    assert "the task kept failing for 3 s" in actions.last_settlement[2]
    state = state_of(actions)
    assert state is not None
    assert (state.status, state.next_step, state.failed) == ("running", 3, 1)
    assert state.attempts is None  # the next step starts at attempt 1


@BOTH
def test_r13_unexpected_exception_is_retried_then_set_aside(policy: FailurePolicy) -> None:
    tasks = Tasks()
    tasks.behaviour["B"] = KeyError("boom")
    processor, _ = make_processor(policy, tasks)
    actions = InMemorySessionActions(state=running(2))

    result = processor.handle(incoming(message(2)), actions)

    assert result.outcome is Outcome.DEAD_LETTERED and len(tasks.calls) == 4
    kind, reason, description = actions.last_settlement
    assert (kind, reason) == ("dead_letter", "UnhandledError")
    assert "KeyError" in description


@BOTH
def test_r13_a_service_out_of_reach_is_a_transient_failure_named_after_it(
    policy: FailurePolicy,
) -> None:
    # What the adapters raise for a refused connection, a timeout, a 503 Server Busy.
    tasks = Tasks()
    tasks.behaviour["B"] = ServiceUnavailable("Table Storage", "ServiceRequestError")
    processor, _ = make_processor(policy, tasks)
    actions = InMemorySessionActions(state=running(2))

    processor.handle(incoming(message(2)), actions)

    kind, reason, description = actions.last_settlement
    assert (kind, reason) == ("dead_letter", "TableStorageUnavailable")
    assert "Gave up: Table Storage was out of reach for 3 s" in description


# R24: the hold runs out before the window ------------------------------------------------------
@BOTH
def test_r24_a_message_whose_wait_outlasts_the_hold_is_handed_back_its_window_kept(
    policy: FailurePolicy,
) -> None:
    tasks = Tasks()
    tasks.behaviour["B"] = transient()
    processor, _time = make_processor(
        policy, tasks, hold_seconds=2.0, window=5.0, min_backoff=1, max_backoff=1
    )
    actions = InMemorySessionActions(state=running(2))

    first = processor.handle(incoming(message(2)), actions)
    second = processor.handle(incoming(message(2), delivery_count=1), actions)
    last = processor.handle(incoming(message(2), delivery_count=2), actions)

    assert [first.outcome, second.outcome] == [Outcome.ABANDONED] * 2
    assert [s[0] for s in actions.settlements] == ["abandon", "abandon", "dead_letter"]
    # attempts are the app's own, whatever the delivery count says (a redelivery tries at
    # once); the window spans the deliveries: given up 5 s after the first failure
    assert [call.attempt for call in tasks.calls] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert last.outcome is Outcome.DEAD_LETTERED and tasks.at[-1] == 5.0
    assert "since " + NOW.isoformat() in actions.last_settlement[2]


@BOTH
def test_r24_a_crash_while_waiting_keeps_the_attempt_and_the_window(policy: FailurePolicy) -> None:
    tasks = Tasks()
    tasks.behaviour["B"] = [transient(), {"paid": True}]
    processor, time = make_processor(policy, tasks)
    actions = InMemorySessionActions(state=running(2))

    def dies(seconds: float) -> None:
        raise ConnectionError("worker died")

    processor._sleep = dies
    with pytest.raises(ConnectionError):
        processor.handle(incoming(message(2)), actions)
    processor._sleep = time.sleep
    result = processor.handle(incoming(message(2)), actions)

    assert result.outcome is Outcome.COMPLETED
    assert [call.attempt for call in tasks.calls] == [1, 2]


@BOTH
def test_a_step_that_succeeds_after_a_retry_leaves_the_next_step_a_fresh_count(
    policy: FailurePolicy,
) -> None:
    tasks = Tasks()
    processor, _ = make_processor(policy, tasks)
    actions = InMemorySessionActions(state=running(2))
    tasks.behaviour["B"] = [transient(), {"paid": True}]
    processor.handle(incoming(message(2)), actions)
    state = state_of(actions)
    assert state is not None and state.attempts is None
    tasks.behaviour["C"] = [TransientTaskError("EmailServerUnavailable", "try later"), {}]

    processor.handle(incoming(message(3)), actions)

    assert [(call.message.task, call.attempt) for call in tasks.calls] == [
        ("B", 1),
        ("B", 2),
        ("C", 1),
        ("C", 2),
    ]


# R25: a paused pipeline, R26: an open circuit --------------------------------------------------
def paused_gate(time: FakeTime, pauses: InMemoryPipelinePauses) -> PipelineGate:
    circuit = Circuit("demo", threshold=2, clock=time.now, monotonic=time.monotonic)
    return PipelineGate(circuit, pauses, pause_ttl=1.0, monotonic=time.monotonic)


@BOTH
def test_r25_a_paused_pipeline_runs_nothing_and_hands_back_unrun_at_the_hold(
    policy: FailurePolicy,
) -> None:
    tasks = Tasks(FakeTime(NOW))
    assert tasks.time is not None
    pauses = InMemoryPipelinePauses()
    pauses.pause("demo", ManualPause("ada@example.com", "maintenance", NOW.isoformat()))
    processor, time = make_processor(
        policy, tasks, hold_seconds=30.0, gate=paused_gate(tasks.time, pauses)
    )
    actions = InMemorySessionActions(state=running(2))

    result = processor.handle(incoming(message(2)), actions)

    assert result.outcome is Outcome.ABANDONED and result.reason == "PipelinePaused"
    assert "paused by ada@example.com" in (result.description or "")
    assert tasks.calls == [] and actions.state_writes == []  # no attempt spent
    assert actions.settlements == [("abandon",)] and actions.renewals >= 1
    assert time.elapsed == pytest.approx(30.0, abs=1.0)
    assert pauses.reads <= 31  # read at most once per its time to live


@BOTH
def test_r25_a_session_waiting_on_a_pause_runs_as_soon_as_it_ends(policy: FailurePolicy) -> None:
    tasks = Tasks(FakeTime(NOW))
    assert tasks.time is not None
    pauses = InMemoryPipelinePauses()
    pauses.pause("demo", ManualPause("ada@example.com", "maintenance", NOW.isoformat()))
    processor, time = make_processor(policy, tasks, gate=paused_gate(tasks.time, pauses))
    actions = InMemorySessionActions(state=running(2))
    resume_at = 10.0
    original = time.sleep

    def sleep(seconds: float) -> None:
        original(seconds)
        if time.elapsed >= resume_at:
            pauses.resume("demo")

    processor._sleep = sleep

    result = processor.handle(incoming(message(2)), actions)

    assert result.outcome is Outcome.COMPLETED and tasks.ran() == ["B"]
    assert resume_at <= tasks.at[0] <= resume_at + 2.0  # within the pause's time to live


@BOTH
def test_r26_while_the_circuit_is_open_a_session_runs_only_as_the_probe(
    policy: FailurePolicy,
) -> None:
    tasks = Tasks(FakeTime(NOW))
    assert tasks.time is not None
    gate = paused_gate(tasks.time, InMemoryPipelinePauses())
    gate.circuit.failed("s-8", "Table Storage")
    gate.circuit.failed("s-9", "Table Storage")
    paused = gate.paused()
    assert paused is not None and paused.dependency == "Table Storage"
    processor, _time = make_processor(policy, tasks, gate=gate)
    actions = InMemorySessionActions(state=running(2))

    result = processor.handle(incoming(message(2)), actions)

    # the first probe is due one backoff (1 s) after the circuit opened; its success closes it
    assert result.outcome is Outcome.COMPLETED and tasks.at == [1.0]
    assert gate.paused() is None


@BOTH
def test_r26_a_session_waits_while_another_probes_then_is_handed_back_unrun(
    policy: FailurePolicy,
) -> None:
    tasks = Tasks(FakeTime(NOW))
    assert tasks.time is not None
    gate = paused_gate(tasks.time, InMemoryPipelinePauses())
    gate.circuit.failed("s-8", "Table Storage")
    gate.circuit.failed("s-9", "Table Storage")
    tasks.time.advance(1.0)
    assert gate.admit("s-8")  # s-8 probes (and its invocation is still running)
    processor, _time = make_processor(policy, tasks, gate=gate, hold_seconds=20.0)
    actions = InMemorySessionActions(state=running(2))

    result = processor.handle(incoming(message(2)), actions)

    assert result.outcome is Outcome.ABANDONED and result.reason == "PipelinePaused"
    assert "Table Storage unreachable since" in (result.description or "")
    assert tasks.calls == [] and actions.state_writes == []


# R27: an outcome that cannot be recorded (Table Storage out of reach after the task ran) --------
class FlakyObserver:
    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.told: list[Any] = []

    def __call__(self, *told: Any) -> None:
        if self.failures:
            self.failures -= 1
            raise ServiceUnavailable("Table Storage", "ServiceRequestError")
        self.told.append(told)


@BOTH
def test_r27_recording_the_outcome_is_retried_holding_the_session_not_the_task(
    policy: FailurePolicy,
) -> None:
    tasks = Tasks()
    observer = FlakyObserver(failures=3)
    processor, _ = make_processor(policy, tasks, observer=observer)
    actions = InMemorySessionActions(state=running(3))

    result = processor.handle(incoming(message(3)), actions)

    assert result.outcome is Outcome.COMPLETED
    assert tasks.ran() == ["C"] and len(observer.told) == 1  # the task ran once
    assert actions.settlements == [("complete",)]


@BOTH
def test_r27_an_outcome_still_unrecorded_at_the_hold_hands_the_message_back(
    policy: FailurePolicy,
) -> None:
    tasks = Tasks()
    observer = FlakyObserver(failures=1000)
    processor, _ = make_processor(policy, tasks, observer=observer, hold_seconds=10.0)
    actions = InMemorySessionActions(state=running(2))

    result = processor.handle(incoming(message(2)), actions)

    assert result.outcome is Outcome.ABANDONED and result.reason == "TableStorageUnavailable"
    assert actions.settlements == [("abandon",)]
    assert actions.state_writes == []  # its redelivery runs the (idempotent) task again


# R14 - R16 ------------------------------------------------------------------------------------
@BOTH
def test_r14_later_message_of_a_failed_session_is_dead_lettered_without_running(
    policy: FailurePolicy,
) -> None:
    tasks = Tasks()
    processor, _ = make_processor(policy, tasks)
    before = failed_at(1)
    actions = InMemorySessionActions(state=before)

    result = processor.handle(incoming(message(2)), actions)

    assert tasks.calls == []
    kind, reason, description = actions.last_settlement
    assert (kind, reason) == ("dead_letter", "SessionFailed")
    assert "step 1 (A)" in description and "PaymentDeclined" in description
    assert result.outcome is Outcome.DEAD_LETTERED
    assert actions.state_writes == []  # not written at all: the state says it already
    assert actions.events == ["dead_letter"]
    assert actions.state == before


@BOTH
def test_r15_last_message_of_a_failed_session_clears_the_state(policy: FailurePolicy) -> None:
    tasks = Tasks()
    processor, _ = make_processor(policy, tasks)
    actions = InMemorySessionActions(state=failed_at(1))

    processor.handle(incoming(message(3)), actions)

    assert tasks.calls == []
    assert actions.last_settlement[:2] == ("dead_letter", "SessionFailed")
    assert actions.state is None
    # Nothing written before the dead-letter; cleared only after it (see R22).
    assert actions.state_writes == [None]
    assert actions.events == ["dead_letter", "set_state", "release_session"]


@BOTH
def test_r16_failing_message_redelivered_keeps_its_own_reason(policy: FailurePolicy) -> None:
    tasks = Tasks()
    processor, _ = make_processor(policy, tasks)
    actions = InMemorySessionActions(state=failed_at(2, reason="UnknownSku"))

    processor.handle(incoming(message(2)), actions)

    assert tasks.calls == []
    assert actions.last_settlement == ("dead_letter", "UnknownSku", "card refused")
    assert actions.state_writes == []  # the state already holds this failure


# R17 - R19 ------------------------------------------------------------------------------------
MALFORMED = {
    "not-json": (b"{nope", "body"),
    "not-utf8": (b"\xff\xfe", "body"),
    "not-an-object": (b"[1, 2]", "body"),
    "missing-field": (
        json.dumps(
            {"job_id": "j", "pipeline": "demo", "task": "A", "step": 1, "payload": {}}
        ).encode(),
        "is_last",
    ),
    "wrong-type": (
        json.dumps(
            {
                "job_id": "j",
                "pipeline": "demo",
                "task": "A",
                "step": "1",
                "is_last": False,
                "payload": {},
            }
        ).encode(),
        "step",
    ),
    "bool-step": (
        json.dumps(
            {
                "job_id": "j",
                "pipeline": "demo",
                "task": "A",
                "step": True,
                "is_last": False,
                "payload": {},
            }
        ).encode(),
        "step",
    ),
    "unknown-task": (
        json.dumps(
            {
                "job_id": "j",
                "pipeline": "demo",
                "task": "Z",
                "step": 1,
                "is_last": False,
                "payload": {},
            }
        ).encode(),
        "task",
    ),
    "other-pipeline": (
        json.dumps(
            {
                "job_id": "j",
                "pipeline": "other",
                "task": "A",
                "step": 1,
                "is_last": False,
                "payload": {},
            }
        ).encode(),
        "pipeline",
    ),
}


@pytest.mark.parametrize("case", MALFORMED, ids=list(MALFORMED))
def test_r17_malformed_message_fails_the_session_under_stop(case: str) -> None:
    body, field_name = MALFORMED[case]
    tasks = Tasks()
    processor, _ = make_processor(STOP, tasks)
    actions = InMemorySessionActions(state=running(2))

    result = processor.handle(incoming(body, props={"step": 2, "is_last": False}), actions)

    assert tasks.calls == []
    kind, reason, description = actions.last_settlement
    assert (kind, reason) == ("dead_letter", "MalformedMessage")
    assert field_name in description
    assert result.outcome is Outcome.DEAD_LETTERED
    state = state_of(actions)
    assert state is not None and state.is_failed
    assert state.failure is not None
    assert (state.failure.reason, state.failure.step) == ("MalformedMessage", 2)
    assert_state_written_before_settlement(actions)


def test_r18_malformed_message_under_continue_is_counted_and_the_session_goes_on() -> None:
    tasks = Tasks()
    processor, _ = make_processor(CONTINUE, tasks)
    actions = InMemorySessionActions(state=running(2))

    processor.handle(incoming(b"{nope", props={"step": 2, "is_last": False}), actions)

    assert actions.last_settlement[:2] == ("dead_letter", "MalformedMessage")
    state = state_of(actions)
    assert state is not None
    assert (state.status, state.failed, state.next_step) == ("running", 1, 3)
    processor.handle(incoming(message(3)), actions)
    assert tasks.ran() == ["C"]


@BOTH
def test_r19_malformed_last_message_still_clears_the_state(policy: FailurePolicy) -> None:
    tasks = Tasks()
    processor, _ = make_processor(policy, tasks)
    actions = InMemorySessionActions(state=running(3))

    processor.handle(incoming(b"garbage", props={"step": 3, "is_last": True}), actions)

    assert actions.last_settlement[:2] == ("dead_letter", "MalformedMessage")
    assert actions.state is None


# R20 / R21 ------------------------------------------------------------------------------------
CORRUPT = {
    "not-json": b"\x00\x01binary",
    "not-an-object": b"[]",
    "unknown-version": json.dumps({"version": 99}).encode(),
    "bad-shape": json.dumps({"version": 1, "status": "running"}).encode(),
    "unknown-status": json.dumps(
        {"version": 1, "status": "odd", "next_step": 1, "completed": [], "context": {}}
    ).encode(),
    "counter-not-a-number": json.dumps(
        {
            "version": 1,
            "status": "running",
            "next_step": 2,
            "completed": ["A"],
            "context": {},
            "processed": "x",
        }
    ).encode(),
    "failure-not-an-object": json.dumps(
        {
            "version": 1,
            "status": "failed",
            "next_step": 2,
            "completed": ["A"],
            "context": {},
            "failure": "boom",
        }
    ).encode(),
    "attempts-not-an-object": json.dumps(
        {
            "version": 1,
            "status": "running",
            "next_step": 2,
            "completed": ["A"],
            "context": {},
            "attempts": 3,
        }
    ).encode(),
    "attempts-count-not-a-number": json.dumps(
        {
            "version": 1,
            "status": "running",
            "next_step": 2,
            "completed": ["A"],
            "context": {},
            "attempts": {"task": "B", "step": 2, "failed": "2"},
        }
    ).encode(),
    "failure-field-of-the-wrong-type": json.dumps(
        {
            "version": 1,
            "status": "failed",
            "next_step": 2,
            "completed": ["A"],
            "context": {},
            "failure": {"task": "B", "step": "2", "reason": 5, "description": "", "at": ""},
        }
    ).encode(),
}


@pytest.mark.parametrize("policy", [STOP, CONTINUE], ids=["stop", "continue"])
@pytest.mark.parametrize("case", CORRUPT, ids=list(CORRUPT))
def test_r20_corrupt_state_is_a_failed_session_not_a_crash_loop(
    case: str, policy: FailurePolicy
) -> None:
    tasks = Tasks()
    processor, _ = make_processor(policy, tasks)
    actions = InMemorySessionActions(state=CORRUPT[case])

    result = processor.handle(incoming(message(2)), actions)

    assert tasks.calls == []
    assert result.outcome is Outcome.DEAD_LETTERED
    assert actions.last_settlement[:2] == ("dead_letter", "CorruptSessionState")
    state = state_of(actions)  # readable again: the next message is short-circuited, not stuck
    assert state is not None and state.is_failed
    assert state.failure is not None and state.failure.reason == "CorruptSessionState"
    processor.handle(incoming(message(3, is_last=False)), actions)
    assert actions.last_settlement[:2] == ("dead_letter", "SessionFailed")


@BOTH
def test_r21_corrupt_state_and_the_last_message_clears_it(policy: FailurePolicy) -> None:
    tasks = Tasks()
    processor, _ = make_processor(policy, tasks)
    actions = InMemorySessionActions(state=b"not json")

    processor.handle(incoming(message(3)), actions)

    assert actions.last_settlement[:2] == ("dead_letter", "CorruptSessionState")
    assert actions.state is None


# A whole session ------------------------------------------------------------------------------
def test_a_stopped_session_runs_nothing_after_the_failure_and_ends_clean() -> None:
    tasks = Tasks()
    tasks.behaviour["A"] = PermanentTaskError("UnknownSku", "SKU X is unknown")
    processor, _ = make_processor(STOP, tasks)
    actions = InMemorySessionActions()

    outcomes = [processor.handle(incoming(message(step)), actions) for step in (1, 2, 3)]

    assert tasks.ran() == ["A"]
    assert [s[1] for s in actions.settlements] == ["UnknownSku", "SessionFailed", "SessionFailed"]
    assert all(o.outcome is Outcome.DEAD_LETTERED for o in outcomes)
    assert actions.state is None


def test_retry_policy_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        RetryPolicy(window=-1)
    with pytest.raises(ValueError):
        RetryPolicy(min_backoff=5, max_backoff=1)


# R22 / R23: crashes between the state write and the dead-letter ------------------------------
class CrashOnDeadLetter(InMemorySessionActions):
    """The worker dies right after writing the state, before the dead-letter reaches Service
    Bus: the message is redelivered with the state as written."""

    def __init__(self, state: bytes | None) -> None:
        super().__init__(state=state)
        self.crashes = 1

    def dead_letter(self, reason: str, description: str) -> None:
        if self.crashes:
            self.crashes -= 1
            raise ConnectionError("worker died")
        super().dead_letter(reason, description)


@BOTH
def test_r22_a_failing_last_message_redelivered_after_a_crash_is_still_dead_lettered(
    policy: FailurePolicy,
) -> None:
    tasks = Tasks()
    tasks.behaviour["C"] = PermanentTaskError("SmtpRejected", "mailbox unavailable")
    processor, _ = make_processor(policy, tasks)
    actions = CrashOnDeadLetter(state=running(3))

    with pytest.raises(ConnectionError):
        processor.handle(incoming(message(3)), actions)
    assert actions.state is not None  # not cleared before the dead-letter happened
    processor.handle(incoming(message(3)), actions)

    assert actions.settlements == [("dead_letter", "SmtpRejected", "mailbox unavailable")]
    assert actions.state is None


@BOTH
def test_r22_the_last_message_of_a_failed_session_survives_the_same_crash(
    policy: FailurePolicy,
) -> None:
    tasks = Tasks()
    processor, _ = make_processor(policy, tasks)
    actions = CrashOnDeadLetter(state=failed_at(1))

    with pytest.raises(ConnectionError):
        processor.handle(incoming(message(3)), actions)
    processor.handle(incoming(message(3)), actions)

    assert [s[:2] for s in actions.settlements] == [("dead_letter", "SessionFailed")]
    assert actions.state is None


def test_r23_a_skipped_row_redelivered_after_a_crash_is_dead_lettered_again() -> None:
    tasks = Tasks()
    tasks.behaviour["B"] = PermanentTaskError("InvalidProduct:price", "price is negative")
    processor, _ = make_processor(CONTINUE, tasks)
    actions = CrashOnDeadLetter(state=running(2))

    with pytest.raises(ConnectionError):
        processor.handle(incoming(message(2)), actions)
    state = state_of(actions)
    assert state is not None and state.next_step == 3  # the state moved on before the crash
    result = processor.handle(incoming(message(2)), actions)

    assert result.outcome is Outcome.DEAD_LETTERED
    assert tasks.ran() == ["B"]  # not run again
    assert actions.settlements == [("dead_letter", "InvalidProduct:price", "price is negative")]
    assert len(actions.state_writes) == 1  # the write before the crash; none on redelivery
    state = state_of(actions)
    assert state is not None and (state.next_step, state.failed) == (3, 1)
    processor.handle(incoming(message(3)), actions)
    assert tasks.ran() == ["B", "C"] and actions.state is None


# Releasing a finished session -----------------------------------------------------------------
def _corrupt(actions: InMemorySessionActions) -> None:
    actions.state = b"not json"


def _failed(actions: InMemorySessionActions) -> None:
    actions.state = failed_at(1)


def _done(actions: InMemorySessionActions) -> None:
    actions.state = running(4)


def _permanent(tasks: Tasks) -> None:
    tasks.behaviour["C"] = PermanentTaskError("SmtpRejected", "mailbox unavailable")


# How the session's last message (step 3) ends: the row, and what the session looks like.
LAST_MESSAGE_ENDINGS = {
    "r3-completed": (None, None, False),
    "r4-redelivered-after-it-ran": (_done, None, False),
    "r8-r9-dead-lettered-by-its-task": (None, _permanent, False),
    "r15-short-circuited": (_failed, None, False),
    "r19-malformed": (None, None, True),
    "r21-corrupt-state": (_corrupt, None, False),
}


@BOTH
@pytest.mark.parametrize("case", LAST_MESSAGE_ENDINGS, ids=list(LAST_MESSAGE_ENDINGS))
def test_the_session_is_released_once_its_last_message_is_settled(
    case: str, policy: FailurePolicy
) -> None:
    given, failing, malformed = LAST_MESSAGE_ENDINGS[case]
    tasks = Tasks()
    if failing:
        failing(tasks)
    processor, _ = make_processor(policy, tasks)
    actions = InMemorySessionActions(state=running(3))
    if given:
        given(actions)
    body = incoming(b"garbage", props={"step": 3, "is_last": True}) if malformed else None

    result = processor.handle(body or incoming(message(3)), actions)

    assert result.outcome is not Outcome.ABANDONED
    assert len(actions.settlements) == 1
    assert actions.events[-1] == "release_session"  # after the settlement, never before
    assert actions.events.count("release_session") == 1


@BOTH
def test_a_session_is_not_released_before_its_last_message(policy: FailurePolicy) -> None:
    tasks = Tasks()
    tasks.behaviour["B"] = PermanentTaskError("PaymentDeclined", "card refused")
    processor, _ = make_processor(policy, tasks)
    actions = InMemorySessionActions()

    processor.handle(incoming(message(1)), actions)
    processor.handle(incoming(message(2)), actions)
    processor.handle(incoming(b"garbage", props={"step": 2, "is_last": False}), actions)

    assert not actions.released


@BOTH
def test_a_last_message_handed_back_for_a_retry_keeps_the_session(policy: FailurePolicy) -> None:
    tasks = Tasks()
    tasks.behaviour["C"] = TransientTaskError("EmailServerUnavailable", "try later")
    processor, _ = make_processor(policy, tasks, hold_seconds=1.0, window=60)
    actions = InMemorySessionActions(state=running(3))

    result = processor.handle(incoming(message(3)), actions)

    assert result.outcome is Outcome.ABANDONED
    assert not actions.released  # the message comes back to this session


class ReleaseFails(InMemorySessionActions):
    def release_session(self) -> None:
        super().release_session()
        raise ConnectionError("the host went away")


def test_a_release_that_fails_changes_nothing_the_message_is_settled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tasks = Tasks()
    processor, _ = make_processor(STOP, tasks)
    actions = ReleaseFails(state=running(3))

    result = processor.handle(incoming(message(3)), actions)

    assert result.outcome is Outcome.COMPLETED
    assert actions.settlements == [("complete",)]
    assert "could not be released" in caplog.text


class ClearFails(InMemorySessionActions):
    def set_state(self, state: bytes | None) -> None:
        if state is None:
            self.events.append("set_state")
            raise ConnectionError("the session lock was lost")
        super().set_state(state)


def test_a_clear_that_fails_after_the_settlement_changes_nothing_and_still_releases(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The state stays on a session that has no messages left: harmless, and said in the log.
    tasks = Tasks()
    processor, _ = make_processor(STOP, tasks)
    actions = ClearFails(state=running(3))

    result = processor.handle(incoming(message(3)), actions)

    assert result.outcome is Outcome.COMPLETED
    assert actions.settlements == [("complete",)]
    assert actions.events[-1] == "release_session"
    assert "could not be cleared" in caplog.text


# R28: Service Bus out of reach for the state or a settlement ------------------------------------
class ServiceBusBlip(InMemorySessionActions):
    """Service Bus answers nothing for the first ``failures`` state writes."""

    def __init__(self, state: bytes | None, failures: int) -> None:
        super().__init__(state=state)
        self.failures = failures

    def set_state(self, state: bytes | None) -> None:
        if self.failures:
            self.failures -= 1
            raise ServiceUnavailable("Service Bus", "ServiceBusConnectionError")
        super().set_state(state)


class ServiceBusGone(InMemorySessionActions):
    def get_state(self) -> bytes | None:
        raise ServiceUnavailable("Service Bus", "ServiceBusConnectionError")


@BOTH
def test_r28_a_service_bus_blip_is_ridden_through_and_the_task_not_run_again(
    policy: FailurePolicy,
) -> None:
    tasks = Tasks()
    processor, time = make_processor(policy, tasks)
    actions = ServiceBusBlip(state=running(2), failures=2)

    result = processor.handle(incoming(message(2)), actions)

    assert result.outcome is Outcome.COMPLETED and tasks.ran() == ["B"]
    assert actions.settlements == [("complete",)]
    assert time.elapsed == 1.5  # backoffs of 0.5 and 1 s


@BOTH
def test_r28_service_bus_still_out_of_reach_fails_the_invocation_and_opens_the_circuit(
    policy: FailurePolicy,
) -> None:
    tasks = Tasks(FakeTime(NOW))
    assert tasks.time is not None
    gate = paused_gate(tasks.time, InMemoryPipelinePauses())
    processor, time = make_processor(policy, tasks, gate=gate)

    # s-1 ran its task, then Service Bus went away before its state write; s-2 meets it gone
    in_flight = ServiceBusBlip(state=running(2), failures=1000)
    with pytest.raises(ServiceUnavailable):
        processor.handle(replace(incoming(message(2)), session_id="s-1"), in_flight)
    gone = ServiceBusGone(state=running(2))
    with pytest.raises(ServiceUnavailable):
        processor.handle(replace(incoming(message(2)), session_id="s-2"), gone)

    paused = gate.paused()
    assert paused is not None and paused.dependency == "Service Bus"
    assert time.elapsed <= 2 * 30.0 + 2  # each gave up after about half a session lock


# A trigger that completes what the function leaves (autoCompleteMessages) -----------------------
@BOTH
def test_a_completed_task_is_left_to_the_trigger_after_its_state_is_written(
    policy: FailurePolicy,
) -> None:
    processor, _ = make_processor(policy, Tasks())
    actions = InMemorySessionActions(state=running(2, processed=1))

    result = processor.handle(incoming(message(2)), actions, completed_by_trigger=True)

    assert result.outcome is Outcome.COMPLETED
    assert actions.settlements == []  # the host completes it once the function returns
    assert actions.events == ["set_state"]
    state = state_of(actions)
    assert state is not None and state.next_step == 3


@BOTH
def test_the_trigger_is_left_no_last_message_and_no_failure(policy: FailurePolicy) -> None:
    tasks = Tasks()
    processor, _ = make_processor(policy, tasks)
    last = InMemorySessionActions(state=running(3))

    processor.handle(incoming(message(3)), last, completed_by_trigger=True)

    # The last one is completed before its state is cleared, as without the trigger (R5).
    assert last.events == ["set_state", "complete", "set_state", "release_session"]

    tasks.behaviour["A"] = PermanentTaskError("Declined", "the card was declined")
    failed = InMemorySessionActions()
    result = processor.handle(incoming(message(1)), failed, completed_by_trigger=True)

    assert result.outcome is Outcome.DEAD_LETTERED
    assert [s[0] for s in failed.settlements] == ["dead_letter"]
