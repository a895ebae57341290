"""The errors Service Bus returns surface as the SDK's documented exceptions.

Lock-lost errors are in test_settlement.py and test_sessions.py, next to the locks.
"""

from __future__ import annotations

import pytest
from azure.servicebus.exceptions import (
    MessageSizeExceededError,
    MessagingEntityNotFoundError,
    ServiceBusError,
)

from sdk import Bus, Queues, Tag, body_of, result

pytestmark = pytest.mark.integration

ONE_MIB = 1024 * 1024


async def test_sending_to_a_missing_queue_is_entity_not_found(bus: Bus) -> None:
    with pytest.raises(MessagingEntityNotFoundError):
        async with bus.sender(f"no-such-queue-{Tag()}") as sender:
            await result(sender.send_messages(Tag().message()))


async def test_receiving_from_a_missing_queue_is_entity_not_found(bus: Bus) -> None:
    with pytest.raises(MessagingEntityNotFoundError):
        async with bus.receiver(f"no-such-queue-{Tag()}", max_wait_time=1) as receiver:
            await result(receiver.receive_messages(max_wait_time=1))


async def test_a_message_over_one_mib_is_refused_and_the_sender_goes_on(
    bus: Bus, queues: Queues
) -> None:
    tag = Tag()
    async with bus.sender(queues.plain) as sender:
        with pytest.raises(MessageSizeExceededError):
            await result(sender.send_messages(tag.message(body=b"x" * (ONE_MIB + 1))))
        await result(sender.send_messages(tag.message(body="small")))

    async with bus.receiver(queues.plain) as receiver:
        (small,) = await tag.receive(receiver, 1)
        assert body_of(small) == b"small"
        await result(receiver.complete_message(small))
        assert await tag.receive(receiver, 1, timeout=1) == []


async def test_a_message_without_a_session_id_is_refused_by_a_session_queue(
    bus: Bus, queues: Queues
) -> None:
    tag = Tag()
    async with bus.sender(queues.sessions) as sender:
        with pytest.raises(ServiceBusError, match="SessionId"):
            await result(sender.send_messages(tag.message()))


async def test_the_wrong_kind_of_receiver_is_refused(bus: Bus, queues: Queues) -> None:
    with pytest.raises(ServiceBusError):
        async with bus.receiver(queues.sessions, max_wait_time=1) as receiver:
            await result(receiver.receive_messages(max_wait_time=1))
    with pytest.raises(ServiceBusError):
        async with bus.receiver(queues.plain, session_id="s", max_wait_time=1) as receiver:
            await result(receiver.receive_messages(max_wait_time=1))
