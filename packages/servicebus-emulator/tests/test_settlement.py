"""Peek-lock settlement: complete, abandon, dead-letter, defer; peek; lock renewal and expiry."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from azure.servicebus import ServiceBusMessageState, ServiceBusSubQueue
from azure.servicebus.exceptions import MessageLockLostError, MessageNotFoundError

from sdk import MAX_DELIVERY_COUNT, SHORT_LOCK_SECONDS, Bus, Queues, Tag, body_of, result

pytestmark = pytest.mark.integration


async def test_complete_removes_the_message(bus: Bus, queues: Queues) -> None:
    tag = Tag()
    await bus.send(queues.plain, tag.message())

    async with bus.receiver(queues.plain) as receiver:
        (message,) = await tag.receive(receiver, 1)
        await result(receiver.complete_message(message))
        assert await tag.receive(receiver, 1, timeout=1) == []
        assert await tag.peek(receiver) == []


async def test_abandon_redelivers_with_delivery_count_plus_one(bus: Bus, queues: Queues) -> None:
    tag = Tag()
    await bus.send(queues.plain, tag.message(body="again"))

    async with bus.receiver(queues.plain) as receiver:
        (first,) = await tag.receive(receiver, 1)
        assert first.delivery_count == 0
        await result(receiver.abandon_message(first))

        (second,) = await tag.receive(receiver, 1)
        assert second.delivery_count == 1
        assert second.sequence_number == first.sequence_number
        assert body_of(second) == b"again"
        assert second.lock_token != first.lock_token
        await result(receiver.complete_message(second))


async def test_dead_letter_keeps_reason_and_description(bus: Bus, queues: Queues) -> None:
    tag = Tag()
    await bus.send(queues.plain, tag.message(body="bad price"))

    async with bus.receiver(queues.plain) as receiver:
        (message,) = await tag.receive(receiver, 1)
        await result(
            receiver.dead_letter_message(
                message, reason="InvalidProduct:price", error_description="price is missing"
            )
        )
        assert await tag.receive(receiver, 1, timeout=1) == []

    async with bus.receiver(queues.plain, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dead:
        (dead_letter,) = await tag.receive(dead, 1)
        assert dead_letter.dead_letter_reason == "InvalidProduct:price"
        assert dead_letter.dead_letter_error_description == "price is missing"
        assert body_of(dead_letter) == b"bad price"
        assert dead_letter.sequence_number == message.sequence_number
        await result(dead.complete_message(dead_letter))
        assert await tag.receive(dead, 1, timeout=1) == []


async def test_deferred_messages_come_back_only_by_sequence_number(
    bus: Bus, queues: Queues
) -> None:
    tag = Tag()
    await bus.send(queues.plain, [tag.message(body="later"), tag.message(body="other")])

    async with bus.receiver(queues.plain) as receiver:
        received = await tag.receive(receiver, 2)
        later = next(m for m in received if body_of(m) == b"later")
        await result(receiver.defer_message(later))
        await result(receiver.abandon_message(next(m for m in received if m is not later)))

        # The deferred one is no longer delivered; the abandoned one is.
        (again,) = await tag.receive(receiver, 2, timeout=2)
        assert body_of(again) == b"other"
        await result(receiver.complete_message(again))
        (peeked,) = await tag.peek(receiver)
        assert peeked.state == ServiceBusMessageState.DEFERRED

        (deferred,) = await result(receiver.receive_deferred_messages([later.sequence_number]))
        assert body_of(deferred) == b"later"
        assert deferred.sequence_number == later.sequence_number
        assert deferred.locked_until_utc is not None
        await result(receiver.complete_message(deferred))

        with pytest.raises(MessageNotFoundError):
            await result(receiver.receive_deferred_messages([later.sequence_number]))


async def test_peek_neither_locks_nor_removes(bus: Bus, queues: Queues) -> None:
    tag = Tag()
    await bus.send(queues.plain, [tag.message(body=f"p{n}") for n in range(3)])

    async with bus.receiver(queues.plain) as receiver:
        peeked = await tag.peek(receiver)
        assert [body_of(m) for m in peeked] == [b"p0", b"p1", b"p2"]
        assert all(m.state == ServiceBusMessageState.ACTIVE for m in peeked)

        # From a sequence number: that message and those after it.
        second = peeked[1].sequence_number
        from_second = await result(
            receiver.peek_messages(max_message_count=2, sequence_number=second)
        )
        assert [m.sequence_number for m in from_second] == [second, peeked[2].sequence_number]

        received = await tag.receive(receiver, 3)
        assert [m.sequence_number for m in received] == [m.sequence_number for m in peeked]
        assert all(m.delivery_count == 0 for m in received)
        for message in received:
            await result(receiver.complete_message(message))


async def test_renewing_a_lock_keeps_the_message_past_its_lock_duration(
    bus: Bus, queues: Queues
) -> None:
    tag = Tag()
    await bus.send(queues.short_lock, tag.message())

    async with bus.receiver(queues.short_lock) as receiver:
        (message,) = await tag.receive(receiver, 1)
        first_lock = message.locked_until_utc
        await asyncio.sleep(SHORT_LOCK_SECONDS * 0.6)
        renewed = await result(receiver.renew_message_lock(message))
        assert renewed > first_lock
        assert message.locked_until_utc == renewed

        await asyncio.sleep(SHORT_LOCK_SECONDS * 0.5)  # past the first lock, inside the renewed one
        await result(receiver.complete_message(message))
        assert await tag.receive(receiver, 1, timeout=1) == []


async def test_lock_expiry_redelivers_and_dead_letters_at_max_delivery_count(
    bus: Bus, queues: Queues
) -> None:
    """A lock that runs out counts as a failed delivery, like an abandon; at MaxDeliveryCount
    (3 on this queue) the message goes to the dead-letter queue."""
    tag = Tag()
    await bus.send(queues.short_lock, tag.message(body="slow"))

    async with bus.receiver(queues.short_lock) as receiver:
        (first,) = await tag.receive(receiver, 1)
        assert first.delivery_count == 0
        await asyncio.sleep(SHORT_LOCK_SECONDS + 0.5)

        # The lock is gone: neither settling nor renewing works any more.
        with pytest.raises(MessageLockLostError):
            await result(receiver.renew_message_lock(first))
        with pytest.raises(MessageLockLostError):
            await result(receiver.complete_message(first))

        (second,) = await tag.receive(receiver, 1)
        assert second.delivery_count == 1
        assert second.sequence_number == first.sequence_number
        await result(receiver.abandon_message(second))

        (third,) = await tag.receive(receiver, 1)
        assert third.delivery_count == MAX_DELIVERY_COUNT - 1
        await asyncio.sleep(SHORT_LOCK_SECONDS + 0.5)
        assert await tag.receive(receiver, 1, timeout=1) == []

    (dead_letter,) = await bus.take(queues.short_lock, tag, 1, dead_letters=True)
    assert dead_letter.dead_letter_reason == "MaxDeliveryCountExceeded"
    assert dead_letter.sequence_number == first.sequence_number
    assert body_of(dead_letter) == b"slow"


async def test_prefetched_messages_released_on_close_keep_their_delivery_count(
    bus: Bus, queues: Queues
) -> None:
    tag = Tag()
    await bus.send(queues.plain, [tag.message(body=f"r{n}") for n in range(5)])

    async with bus.receiver(queues.plain, prefetch_count=5) as receiver:
        (first,) = await tag.receive(receiver, 1)
        await result(receiver.complete_message(first))
        # The other four sit in the prefetch buffer, locked; closing releases them.

    async with bus.receiver(queues.plain) as receiver:
        rest = await tag.receive(receiver, 4)
        assert sorted(body_of(m) for m in rest) == [b"r1", b"r2", b"r3", b"r4"]
        assert [m.delivery_count for m in rest] == [0, 0, 0, 0]
        for message in rest:
            await result(receiver.complete_message(message))


async def test_auto_lock_renewer_keeps_a_message_past_its_lock_duration(
    bus: Bus, queues: Queues
) -> None:
    from azure.servicebus import AutoLockRenewer
    from azure.servicebus.aio import AutoLockRenewer as AsyncAutoLockRenewer

    tag = Tag()
    await bus.send(queues.short_lock, tag.message())

    renewer: Any = (AutoLockRenewer if bus.kind == "sync" else AsyncAutoLockRenewer)(
        max_lock_renewal_duration=30
    )
    try:
        async with bus.receiver(queues.short_lock) as receiver:
            (message,) = await tag.receive(receiver, 1)
            first_lock = message.locked_until_utc
            renewer.register(receiver, message)
            await asyncio.sleep(SHORT_LOCK_SECONDS + 1.5)
            assert message.locked_until_utc > first_lock
            await result(receiver.complete_message(message))
            assert await tag.receive(receiver, 1, timeout=1) == []
    finally:
        await result(renewer.close())


async def test_a_deferred_message_can_be_dead_lettered(bus: Bus, queues: Queues) -> None:
    tag = Tag()
    await bus.send(queues.plain, tag.message(body="deferred then dead"))

    async with bus.receiver(queues.plain) as receiver:
        (message,) = await tag.receive(receiver, 1)
        await result(receiver.defer_message(message))
        (deferred,) = await result(receiver.receive_deferred_messages([message.sequence_number]))
        renewed = await result(receiver.renew_message_lock(deferred))
        assert renewed >= deferred.locked_until_utc
        await result(
            receiver.dead_letter_message(deferred, reason="Gave up", error_description="deferred")
        )

    (dead_letter,) = await bus.take(queues.plain, tag, 1, dead_letters=True)
    assert dead_letter.dead_letter_reason == "Gave up"
    assert dead_letter.dead_letter_error_description == "deferred"
    assert dead_letter.sequence_number == message.sequence_number


async def test_dead_letters_are_forwarded_where_forward_dead_lettered_messages_to_says(
    bus: Bus, queues: Queues
) -> None:
    """ForwardDeadLetteredMessagesTo: a dead letter goes to the other queue as an active
    message, and nothing is left in the first queue's dead-letter sub-queue."""
    tag = Tag()
    await bus.send(queues.forward_dead_letters, tag.message(body="forward me"))

    async with bus.receiver(queues.forward_dead_letters) as receiver:
        (message,) = await tag.receive(receiver, 1)
        await result(
            receiver.dead_letter_message(message, reason="Forwarded", error_description="away")
        )
        assert await tag.receive(receiver, 1, timeout=1) == []

    async with bus.receiver(queues.dead_letter_target) as target:
        (peeked,) = await tag.peek(target)
        assert peeked.state == ServiceBusMessageState.ACTIVE
        (forwarded,) = await tag.receive(target, 1)
        assert body_of(forwarded) == b"forward me"
        assert forwarded.message_id == message.message_id
        await result(target.complete_message(forwarded))

    async with bus.receiver(
        queues.forward_dead_letters, sub_queue=ServiceBusSubQueue.DEAD_LETTER
    ) as dead:
        assert await tag.peek(dead) == []
        assert await tag.receive(dead, 1, timeout=1) == []
