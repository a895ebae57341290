"""The processor's session actions over a real session on the project's emulator: the
extension's ``ServiceBusMessageActions`` settle through the host's Settlement gRPC service
(``functions_local_host.settlement``), which uses the session receiver that holds the lock."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient

from shared.domain.envelope import TaskMessage, parse_task_message
from shared.domain.errors import PermanentTaskError, TransientTaskError
from shared.domain.session_state import decode_session_state
from shared.entrypoints.servicebus_actions import incoming_message
from shared.service_layer.processor import (
    FailurePolicy,
    Outcome,
    RetryPolicy,
    SessionProcessor,
    TaskInvocation,
)

from .conftest import ServiceBusEmulator
from .servicebus import (
    SessionRunner,
    get_session_state,
    outcomes,
    peek_dead_letters,
    send_tasks,
)

pytestmark = pytest.mark.integration


def ok(invocation: TaskInvocation) -> Mapping[str, Any]:
    return {f"done_{invocation.message.step}": invocation.attempt}


def processor(
    tasks: Mapping[str, Any],
    policy=FailurePolicy.STOP_ON_FAILURE,
    *,
    backoff: float = 0.0,
    hold_seconds: float = 300.0,
) -> SessionProcessor:
    return SessionProcessor(
        pipeline="purchase",
        tasks=tasks,
        policy=policy,
        retry=RetryPolicy(window=60, min_backoff=backoff, max_backoff=backoff),
        hold_seconds=hold_seconds,
    )


def session(job_id: str, names: list[str]) -> list[TaskMessage]:
    return [
        TaskMessage(job_id, "purchase", name, step, step == len(names), {"n": step})
        for step, name in enumerate(names, 1)
    ]


def test_a_session_runs_in_order_keeping_its_state_between_messages_and_clearing_it_at_the_end(
    servicebus_client: ServiceBusClient,
    servicebus_emulator: ServiceBusEmulator,
    session_runner: SessionRunner,
    session_queue: str,
) -> None:
    seen: list[tuple[int, dict[str, Any]]] = []

    def remember(invocation: TaskInvocation) -> Mapping[str, Any]:
        seen.append((invocation.message.step, dict(invocation.context)))
        return ok(invocation)

    send_tasks(servicebus_client, session_queue, "s-ok", session("j-ok", ["A", "A", "A"]))

    results = session_runner.run(session_queue, "s-ok", processor({"A": remember}))

    assert outcomes(results) == [Outcome.COMPLETED] * 3
    assert seen == [(1, {}), (2, {"done_1": 1}), (3, {"done_1": 1, "done_2": 1})]
    assert get_session_state(servicebus_client, session_queue, "s-ok") is None
    assert servicebus_emulator.counts(session_queue)["active"] == 0


def test_a_transient_failure_is_tried_again_holding_the_session_with_the_next_attempt_number(
    servicebus_client: ServiceBusClient, session_runner: SessionRunner, session_queue: str
) -> None:
    attempts: list[int] = []

    def flaky(invocation: TaskInvocation) -> Mapping[str, Any]:
        attempts.append(invocation.attempt)
        if invocation.attempt < 2:
            raise TransientTaskError("ProviderDown", "timed out")
        return ok(invocation)

    send_tasks(servicebus_client, session_queue, "s-flaky", session("j-f", ["F", "F"]))

    results = session_runner.run(session_queue, "s-flaky", processor({"F": flaky}))

    assert outcomes(results) == [Outcome.COMPLETED, Outcome.COMPLETED]
    assert attempts == [1, 2, 1, 2]


def test_a_wait_longer_than_the_hold_hands_the_message_back_and_the_count_goes_on(
    servicebus_client: ServiceBusClient, session_runner: SessionRunner, session_queue: str
) -> None:
    attempts: list[int] = []

    def flaky(invocation: TaskInvocation) -> Mapping[str, Any]:
        attempts.append(invocation.attempt)
        if invocation.attempt < 2:
            raise TransientTaskError("ProviderDown", "timed out")
        return ok(invocation)

    send_tasks(servicebus_client, session_queue, "s-back", session("j-b", ["F", "F"]))

    results = session_runner.run(
        session_queue, "s-back", processor({"F": flaky}, backoff=1.0, hold_seconds=0.5)
    )

    got = outcomes(results)
    assert got == [Outcome.ABANDONED, Outcome.COMPLETED, Outcome.ABANDONED, Outcome.COMPLETED]
    assert attempts == [1, 2, 1, 2]


def test_a_failed_session_dead_letters_the_rest_with_reasons_and_keeps_the_failure_in_state(
    servicebus_client: ServiceBusClient,
    servicebus_emulator: ServiceBusEmulator,
    session_runner: SessionRunner,
    session_queue: str,
) -> None:
    def declined(invocation: TaskInvocation) -> Mapping[str, Any]:
        raise PermanentTaskError("PaymentDeclined", "The card was declined.")

    send_tasks(servicebus_client, session_queue, "s-fail", session("j-x", ["A", "D", "A", "A"]))

    results = session_runner.run(session_queue, "s-fail", processor({"A": ok, "D": declined}))

    assert outcomes(results) == [
        Outcome.COMPLETED,
        *[Outcome.DEAD_LETTERED] * 3,
    ]
    letters = peek_dead_letters(servicebus_client, session_queue)
    assert [parse_task_message(m.body).step for m in letters] == [2, 3, 4]
    assert servicebus_emulator.counts(session_queue)["dead_lettered"] == 3
    assert get_session_state(servicebus_client, session_queue, "s-fail") is None  # last cleared


def test_the_state_written_before_a_crash_makes_the_redelivery_a_no_op(
    servicebus_client: ServiceBusClient, session_runner: SessionRunner, session_queue: str
) -> None:
    """The function dies after writing the state but before completing: the host abandons,
    the message comes back, and the processor completes it without running the task again."""
    runs: list[int] = []

    def counted(invocation: TaskInvocation) -> Mapping[str, Any]:
        runs.append(invocation.message.step)
        return ok(invocation)

    class DiesBeforeTheFirstCompletion:
        crashed = False

        def __init__(self, actions: Any) -> None:
            self._actions = actions

        def __getattr__(self, name: str) -> Any:
            return getattr(self._actions, name)

        def complete(self) -> None:
            if not DiesBeforeTheFirstCompletion.crashed:
                DiesBeforeTheFirstCompletion.crashed = True
                raise RuntimeError("worker died")
            self._actions.complete()

    send_tasks(servicebus_client, session_queue, "s-crash", session("j-c", ["A", "A"]))

    results = session_runner.run(
        session_queue, "s-crash", processor({"A": counted}), wrap=DiesBeforeTheFirstCompletion
    )

    assert isinstance(results[0], RuntimeError)
    assert outcomes(results[1:]) == [
        Outcome.ALREADY_DONE,
        Outcome.COMPLETED,
    ]
    assert runs == [1, 2]


def test_state_set_through_the_actions_is_the_sessions_state(
    servicebus_client: ServiceBusClient, session_runner: SessionRunner, session_queue: str
) -> None:
    """A session that is not finished keeps its state on the queue between receivers."""
    send_tasks(servicebus_client, session_queue, "s-keep", session("j-k", ["A", "A", "A"]))

    session_runner.run(session_queue, "s-keep", processor({"A": ok}), max_messages=2)

    state = decode_session_state(get_session_state(servicebus_client, session_queue, "s-keep"))
    assert state is not None and state.next_step == 3
    assert dict(state.context) == {"done_1": 1, "done_2": 1}


def test_the_processor_sees_application_properties_as_they_were_sent(
    servicebus_client: ServiceBusClient, session_queue: str
) -> None:
    """The SDK hands string properties back as bytes; the processor and its observers get
    the str that was sent (an import row's job id must match the job's)."""
    send_tasks(servicebus_client, session_queue, "s-props", session("j-p", ["A"]))

    with servicebus_client.get_queue_receiver(
        session_queue, session_id="s-props", max_wait_time=2
    ) as receiver:
        [message] = receiver.receive_messages(max_wait_time=2)
        receiver.complete_message(message)

    incoming = incoming_message(message)
    assert incoming.application_properties == {
        "job_id": "j-p",
        "pipeline": "purchase",
        "task": "A",
        "step": 1,
        "is_last": True,
    }
    assert (incoming.session_id, incoming.message_id, incoming.delivery_count) == (
        "s-props",
        "j-p:1",
        0,
    )
