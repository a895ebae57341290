"""Helpers for the tests that run on the Service Bus emulator: sending and receiving whole
sessions through the SDK, and running a processor over a session the way the Functions host
does (a session receiver, and ``ServiceBusMessageActions`` that settle through the host's
Settlement gRPC service, here ``functions_local_host.settlement``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceivedMessage,
    ServiceBusSubQueue,
)

from functions_local_host.settlement import HeldMessage, HeldSession, SettlementServer
from shared.adapters.servicebus_sender import to_service_bus_message
from shared.domain.envelope import TaskMessage, body_bytes, plain_properties
from shared.entrypoints.servicebus_actions import FunctionSessionActions, incoming_message
from shared.service_layer.ports import SessionActions
from shared.service_layer.processor import Outcome, Result, SessionProcessor

WAIT_SECONDS = 1.0  # the emulator is local: a second of silence means the session is drained


@dataclass(frozen=True)
class Received:
    """What a test looks at in a received message."""

    message_id: str | None
    session_id: str | None
    sequence_number: int | None
    body: bytes
    application_properties: dict[str, Any]
    delivery_count: int | None

    def json(self) -> Any:
        return json.loads(self.body)


def received(message: ServiceBusReceivedMessage) -> Received:
    return Received(
        message_id=message.message_id,
        session_id=message.session_id,
        sequence_number=message.sequence_number,
        body=body_bytes(message.body),
        application_properties=plain_properties(message.application_properties),
        delivery_count=message.delivery_count,
    )


PURCHASE_TASKS = (
    "GenerateOrderNumber",
    "CalculateTotal",
    "ProcessPayment",
    "GenerateReceipt",
    "SendReceiptEmail",
)


def tasks(
    job_id: str, count: int, *, total: int | None = None, filler: int = 0
) -> list[TaskMessage]:
    """Steps 1..count of a purchase-like session of ``total`` steps (default ``count``): the
    last one is marked only when it is among them. ``filler`` bytes in step 2's payload."""
    total = total or count
    return [
        TaskMessage(
            job_id=job_id,
            pipeline="purchase",
            task=PURCHASE_TASKS[(step - 1) % len(PURCHASE_TASKS)],
            step=step,
            is_last=step == total,
            payload={"n": step, **({"filler": "f" * filler} if filler and step == 2 else {})},
        )
        for step in range(1, count + 1)
    ]


def send_tasks(
    client: ServiceBusClient, queue: str, session_id: str, messages: Sequence[TaskMessage]
) -> None:
    """One send call per message, as separate operations (each gets its own sequence
    number)."""
    with client.get_queue_sender(queue) as sender:
        for message in messages:
            sender.send_messages(to_service_bus_message(session_id, message))


def send_interleaved(
    client: ServiceBusClient, queue: str, sessions: dict[str, Sequence[TaskMessage]]
) -> None:
    """Messages of several sessions sent turn by turn, so their sequence numbers interleave."""
    with client.get_queue_sender(queue) as sender:
        longest = max(len(messages) for messages in sessions.values())
        for index in range(longest):
            for session_id, messages in sessions.items():
                if index < len(messages):
                    sender.send_messages(to_service_bus_message(session_id, messages[index]))


def receive_session(
    client: ServiceBusClient, queue: str, session_id: str, *, complete: bool = True
) -> list[Received]:
    """Every message of the session in delivery order (completed unless told otherwise)."""
    result: list[Received] = []
    with client.get_queue_receiver(
        queue, session_id=session_id, max_wait_time=WAIT_SECONDS
    ) as receiver:
        while True:
            batch = receiver.receive_messages(max_message_count=50, max_wait_time=WAIT_SECONDS)
            if not batch:
                return result
            for message in batch:
                result.append(received(message))
                if complete:
                    receiver.complete_message(message)


def get_session_state(client: ServiceBusClient, queue: str, session_id: str) -> bytes | None:
    with client.get_queue_receiver(
        queue, session_id=session_id, max_wait_time=WAIT_SECONDS
    ) as receiver:
        state = receiver.session.get_state()
    return bytes(state) if state else None


def dead_letter_session(
    client: ServiceBusClient,
    queue: str,
    session_id: str,
    reason: Callable[[Received], tuple[str, str] | None],
    *,
    reverse: bool = False,
) -> int:
    """Receive every message of the session and dead-letter each with ``reason(message)``
    -> (reason, description), or complete it when that is None; with ``reverse`` the last
    received is settled first. Returns how many were dead-lettered."""
    with client.get_queue_receiver(
        queue, session_id=session_id, max_wait_time=WAIT_SECONDS
    ) as receiver:
        messages: list[ServiceBusReceivedMessage] = []
        while True:
            batch = receiver.receive_messages(max_message_count=50, max_wait_time=WAIT_SECONDS)
            if not batch:
                break
            messages.extend(batch)
        dead = 0
        for message in reversed(messages) if reverse else messages:
            verdict = reason(received(message))
            if verdict is None:
                receiver.complete_message(message)
                continue
            why, description = verdict
            receiver.dead_letter_message(message, reason=why, error_description=description)
            dead += 1
    return dead


def peek_dead_letters(client: ServiceBusClient, queue: str) -> list[Received]:
    with client.get_queue_receiver(
        queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=WAIT_SECONDS
    ) as receiver:
        return [received(m) for m in receiver.peek_messages(max_message_count=1000)]


def send_raw(client: ServiceBusClient, queue: str, messages: Iterable[ServiceBusMessage]) -> None:
    with client.get_queue_sender(queue) as sender:
        for message in messages:
            sender.send_messages(message)


def outcomes(results: Sequence[Result | Exception]) -> list[Outcome]:
    """The outcome of each invocation; one that raised fails the test with its error."""
    return [_result(r).outcome for r in results]


def _result(result: Result | Exception) -> Result:
    if isinstance(result, Exception):
        raise AssertionError(f"the invocation raised {result!r}") from result
    return result


class SessionRunner:
    """Runs a ``SessionProcessor`` over one session as the Functions host does: it accepts the
    session, receives one message at a time, and gives the processor a
    ``FunctionSessionActions`` over the extension's real ``ServiceBusMessageActions``, whose
    gRPC calls the host's Settlement service carries out with the receiver holding the lock."""

    def __init__(self, client: ServiceBusClient, settlement: SettlementServer) -> None:
        self._client = client
        self._settlement = settlement

    def run(
        self,
        queue: str,
        session_id: str,
        processor: SessionProcessor,
        *,
        max_messages: int = 100,
        wrap: Callable[[SessionActions], SessionActions] | None = None,
    ) -> list[Result | Exception]:
        """Handle the session's messages until none arrives for a while; the results in
        order (a redelivered message appears once per delivery). A processor that raises is
        a failed invocation: the host abandons the message, and the error is in the results.
        ``wrap`` lets a test put a fault in front of the real actions."""
        registry = self._settlement.registry
        results: list[Result | Exception] = []
        with self._client.get_queue_receiver(
            queue, session_id=session_id, max_wait_time=WAIT_SECONDS
        ) as receiver:
            held_session = HeldSession(session_id, receiver)
            registry.hold_session(held_session)
            try:
                while len(results) < max_messages:
                    with held_session.lock:
                        batch = receiver.receive_messages(
                            max_message_count=1, max_wait_time=WAIT_SECONDS
                        )
                    if not batch:
                        break
                    [message] = batch
                    held = HeldMessage(message, receiver, held_session.lock, held_session)
                    registry.hold_message(held)
                    try:
                        actions: SessionActions = FunctionSessionActions(
                            self._settlement.message_actions(), message
                        )
                        if wrap is not None:
                            actions = wrap(actions)
                        try:
                            results.append(processor.handle(incoming_message(message), actions))
                        except Exception as error:
                            results.append(error)
                            with held_session.lock:
                                if not held.settled:
                                    receiver.abandon_message(message)
                    finally:
                        registry.drop_message(held)
            finally:
                registry.drop_session(held_session)
        return results
