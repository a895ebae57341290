"""The Service Bus functions, called as the worker calls them: a real ServiceBusReceivedMessage
and a real ServiceBusMessageActions talking gRPC to an in-process Settlement server."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from azure_functions_runtime.bindings.context import Context
from azure_functions_runtime.bindings.retrycontext import RetryContext
from azure_functions_runtime.bindings.tracecontext import TraceContext
from azurefunctions.extensions.bindings.servicebus import (
    ServiceBusMessageActions,
    ServiceBusReceivedMessage,
)
from azurefunctions.extensions.bindings.servicebus.serviceBusMessageActions import (
    SettlementError,
)

from shared.domain.envelope import TaskMessage
from shared.domain.errors import ServiceUnavailable
from shared.domain.pipelines import PRODUCT_IMPORT, PURCHASE
from shared.entrypoints.servicebus_actions import FunctionSessionActions, incoming_message
from shared.entrypoints.session_queues import (
    BATCH_TRIGGERS,
    TRIGGERS,
    SessionBatchTrigger,
    SessionTrigger,
)

from .conftest import LOCK_SECONDS, RecordingSettlement, Twins, received_message

purchase_tasks = TRIGGERS[PURCHASE]
product_import_tasks = BATCH_TRIGGERS[PRODUCT_IMPORT][0]

SESSION = "job-1"


def invocation() -> Any:
    """The invocation context the worker passes a function that takes ``context``: here with
    the empty trace context of a host that traces nothing."""
    return Context(
        "purchase_tasks",
        ".",
        str(uuid.uuid4()),
        threading.local(),
        TraceContext("", "", {}),
        RetryContext(0, 0, None),
    )


def _task(task: str, step: int, *, is_last: bool = False, pipeline: str = PURCHASE) -> bytes:
    return TaskMessage("job-1", pipeline, task, step, is_last, {}).to_json()


def deliver(
    trigger: SessionTrigger,
    actions: ServiceBusMessageActions,
    body: bytes,
    *,
    session_id: str = SESSION,
    **received: Any,
) -> ServiceBusReceivedMessage:
    """``body`` handed to ``trigger`` as the worker hands a message of ``session_id`` over
    (``received``: more of ``received_message``'s fields); the message it was handed."""
    message = received_message(body, session_id=session_id, **received)
    trigger(message, actions, invocation())
    return message


def deliver_batch(
    trigger: SessionBatchTrigger,
    actions: ServiceBusMessageActions,
    *bodies: bytes,
    session_id: str = SESSION,
    **received: Any,
) -> list[ServiceBusReceivedMessage]:
    """``bodies`` handed to a batch ``trigger`` as the worker hands a batch of ``session_id``
    over (``received``: more of ``received_message``'s fields, for each); the messages."""
    messages = [received_message(body, session_id=session_id, **received) for body in bodies]
    trigger(messages, actions)
    return messages


def test_a_successful_task_is_completed_and_its_state_kept_for_the_next_step(
    twins: Twins, settlement: RecordingSettlement, message_actions: ServiceBusMessageActions
) -> None:
    deliver(purchase_tasks, message_actions, _task("First", 1))

    # The trigger completes it once the function returns (autoCompleteMessages): the app
    # settles nothing, and its state is written before the function returns.
    assert settlement.settlements() == []
    assert json.loads(settlement.states[SESSION])["next_step"] == 2
    assert settlement.releases() == []  # more messages of the session are to come


def test_the_next_step_reads_the_state_through_get_session_state_over_grpc(
    twins: Twins, settlement: RecordingSettlement, message_actions: ServiceBusMessageActions
) -> None:
    deliver(purchase_tasks, message_actions, _task("First", 1))
    second = deliver(purchase_tasks, message_actions, _task("Second", 2, is_last=True))

    assert ("get_session_state", SESSION) in settlement.calls
    assert settlement.settlements()[-1] == ("complete", str(second.lock_token))
    # The last step clears the state with an empty value: a finished session costs nothing.
    assert ("set_session_state", (SESSION, b"")) in settlement.calls
    assert SESSION not in settlement.states
    # ... and, once settled, lets the host take the next session at once.
    assert settlement.calls[-1] == ("release_session", SESSION)
    assert settlement.releases() == [SESSION]


def test_a_failing_task_is_dead_lettered_with_a_reason_a_person_can_act_on(
    twins: Twins, settlement: RecordingSettlement, message_actions: ServiceBusMessageActions
) -> None:
    message = deliver(purchase_tasks, message_actions, _task("Declined", 1))

    [(kind, (lock_token, reason, description))] = settlement.settlements()
    assert (kind, lock_token, reason) == ("deadletter", str(message.lock_token), "PaymentDeclined")
    assert "ask for another card" in description
    assert json.loads(settlement.states[SESSION])["failure"]["reason"] == "PaymentDeclined"


def test_a_transient_failure_is_abandoned_for_another_attempt_then_dead_lettered(
    twins: Twins, settlement: RecordingSettlement, message_actions: ServiceBusMessageActions
) -> None:
    # No delivery count, as Azure hands the message over: the app counts in the state.
    flaky = _task("Flaky", 1)
    first = deliver(purchase_tasks, message_actions, flaky, delivery_count=None)
    assert json.loads(settlement.states[SESSION])["attempts"]["failed"] == 1
    twins.time.advance(1.0)  # the window (1 s) has passed by the redelivery
    deliver(purchase_tasks, message_actions, flaky, delivery_count=None)

    [abandoned, (kind, (_, reason, description))] = settlement.settlements()
    assert abandoned == ("abandon", str(first.lock_token))
    assert (kind, reason) == ("deadletter", "PaymentProviderUnavailable")
    assert description.startswith("Gave up: the payment provider was out of reach for 1 s")
    assert json.loads(settlement.states[SESSION])["failure"]["reason"] == (
        "PaymentProviderUnavailable"
    )


def test_a_last_message_redelivered_after_its_completion_failed_ends_the_session_once(
    twins: Twins, settlement: RecordingSettlement, message_actions: ServiceBusMessageActions
) -> None:
    deliver(purchase_tasks, message_actions, _task("First", 1))
    body = _task("Second", 2, is_last=True)
    settlement.lost.add("complete")  # tried again for half a lock, then the invocation fails
    with pytest.raises(ServiceUnavailable):
        deliver(purchase_tasks, message_actions, body)
    assert json.loads(settlement.states[SESSION])["next_step"] == 3  # kept for the redelivery
    settlement.lost.clear()
    again = deliver(purchase_tasks, message_actions, body, delivery_count=None)

    assert settlement.settlements()[-1] == ("complete", str(again.lock_token))
    assert SESSION not in settlement.states
    assert settlement.releases() == [SESSION]


def test_a_redelivered_finished_step_is_completed_without_running_again(
    twins: Twins, settlement: RecordingSettlement, message_actions: ServiceBusMessageActions
) -> None:
    deliver(purchase_tasks, message_actions, _task("First", 1))
    again = deliver(purchase_tasks, message_actions, _task("First", 1), delivery_count=1)

    assert settlement.settlements()[-1] == ("complete", str(again.lock_token))


def test_an_unreadable_import_row_is_dead_lettered_as_malformed(
    twins: Twins, settlement: RecordingSettlement, message_actions: ServiceBusMessageActions
) -> None:
    deliver_batch(product_import_tasks, message_actions, b"not json", session_id="import-1")

    [(kind, (_, reason, description))] = settlement.settlements()
    assert (kind, reason) == ("deadletter", "MalformedMessage")
    assert "Fix the sender" in description


def test_an_import_row_is_completed(
    twins: Twins, settlement: RecordingSettlement, message_actions: ServiceBusMessageActions
) -> None:
    body = _task("ImportProduct", 1, is_last=True, pipeline=PRODUCT_IMPORT)
    [message] = deliver_batch(product_import_tasks, message_actions, body, session_id="import-1")

    assert settlement.settlements() == [("complete", str(message.lock_token))]
    assert settlement.calls[-1] == ("release_session", "import-1")


def test_import_rows_before_the_last_are_left_for_the_host_to_complete_after_their_state(
    twins: Twins, settlement: RecordingSettlement, message_actions: ServiceBusMessageActions
) -> None:
    rows = [
        TaskMessage(
            "job-1",
            PRODUCT_IMPORT,
            "ImportProduct",
            step,
            False,
            {"sku": f"SKU-{step}", "name": "Mug", "price": "4.50", "currency": "EUR"},
        ).to_json()
        for step in (1, 2)
    ]
    deliver_batch(product_import_tasks, message_actions, *rows, session_id="import-1")

    # The trigger has autoCompleteMessages: the host completes them once the function returns.
    assert settlement.settlements() == []
    assert json.loads(settlement.states["import-1"])["next_step"] == 3  # both rows recorded


def test_a_dead_lettered_last_message_releases_its_session(
    twins: Twins, settlement: RecordingSettlement, message_actions: ServiceBusMessageActions
) -> None:
    deliver(purchase_tasks, message_actions, _task("Declined", 1))
    last = deliver(purchase_tasks, message_actions, _task("Second", 2, is_last=True))

    (kind, (lock_token, reason, _)) = settlement.settlements()[-1]
    assert (kind, lock_token, reason) == ("deadletter", str(last.lock_token), "SessionFailed")
    assert settlement.calls[-1] == ("release_session", SESSION)
    assert settlement.releases() == [SESSION]


def test_an_unreadable_last_import_row_releases_its_session(
    twins: Twins, settlement: RecordingSettlement, message_actions: ServiceBusMessageActions
) -> None:
    deliver_batch(
        product_import_tasks,
        message_actions,
        b"not json",
        session_id="import-2",
        application_properties={b"step": 7, b"is_last": True},
    )

    [(kind, (_, reason, _))] = settlement.settlements()
    assert (kind, reason) == ("deadletter", "MalformedMessage")
    assert settlement.releases() == ["import-2"]


def test_get_session_state_is_preferred_when_the_actions_class_has_it(
    settlement: RecordingSettlement, message_actions: ServiceBusMessageActions
) -> None:
    asked: list[str] = []

    class NewerActions(ServiceBusMessageActions):
        def get_session_state(self, session_id: str) -> bytes:
            asked.append(session_id)
            return b'{"from": "getter"}'

    newer = NewerActions.__new__(NewerActions)
    message = received_message(b"{}", session_id=SESSION)

    state = FunctionSessionActions(newer, message).get_state()

    assert state == b'{"from": "getter"}'
    assert asked == [SESSION]
    assert not [c for c in settlement.calls if c[0] == "get_session_state"]


def test_state_round_trips_and_clears_over_grpc(
    settlement: RecordingSettlement, message_actions: ServiceBusMessageActions
) -> None:
    actions = FunctionSessionActions(message_actions, received_message(b"{}", session_id=SESSION))

    assert actions.get_state() is None
    actions.set_state(b'{"next_step": 3}')
    assert actions.get_state() == b'{"next_step": 3}'
    actions.set_state(None)
    assert actions.get_state() is None


def test_a_host_that_cannot_be_reached_is_service_bus_unavailable() -> None:
    import grpc

    from shared.adapters.servicebus_bindings import settlement_actions

    channel = grpc.insecure_channel("127.0.0.1:1")
    actions = settlement_actions(channel, "127.0.0.1:1")
    adapter = FunctionSessionActions(actions, received_message(b"{}", session_id=SESSION))
    try:
        with pytest.raises(ServiceUnavailable, match="Service Bus could not be reached") as error:
            adapter.get_state()
    finally:
        channel.close()
    assert isinstance(error.value.__cause__, SettlementError)
    assert error.value.dependency == "Service Bus"


def test_a_session_lock_is_renewed_over_grpc_and_says_until_when(
    settlement: RecordingSettlement, message_actions: ServiceBusMessageActions
) -> None:
    actions = FunctionSessionActions(message_actions, received_message(b"{}", session_id=SESSION))

    locked_until = actions.renew_lock()

    assert ("renew_session_lock", SESSION) in settlement.calls
    assert locked_until is not None
    left = (locked_until - datetime.now(UTC)).total_seconds()
    assert LOCK_SECONDS - 5 < left <= LOCK_SECONDS


def test_a_renewal_refused_by_the_host_is_service_bus_unavailable(
    settlement: RecordingSettlement, message_actions: ServiceBusMessageActions
) -> None:
    actions = FunctionSessionActions(message_actions, received_message(b"{}", session_id=SESSION))
    settlement.fail_once.add("renew_session_lock")

    with pytest.raises(ServiceUnavailable, match="renew_session_lock"):
        actions.renew_lock()


def test_the_incoming_message_has_the_body_attempt_and_decoded_properties() -> None:
    properties: dict[bytes, Any] = {b"step": 2, b"is_last": False}
    message = received_message(
        b'{"x": 1}',
        session_id=SESSION,
        delivery_count=2,
        message_id="job-1:2",
        application_properties=properties,
    )

    incoming = incoming_message(message)

    assert incoming.body == b'{"x": 1}'
    assert incoming.session_id == SESSION
    assert incoming.delivery_count == 2
    assert incoming.message_id == "job-1:2"
    assert incoming.application_properties == {"step": 2, "is_last": False}


def test_a_message_without_a_delivery_count_is_handed_on_as_such() -> None:
    message = received_message(b"{}", session_id=SESSION, delivery_count=None)

    assert message.delivery_count is None
    assert incoming_message(message).delivery_count is None
