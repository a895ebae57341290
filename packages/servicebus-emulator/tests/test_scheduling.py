"""Scheduled messages, cancelling them, time-to-live expiry and duplicate detection."""

from __future__ import annotations

import asyncio
import datetime
import time

import pytest
from azure.servicebus import ServiceBusMessageState, ServiceBusReceiveMode, ServiceBusSubQueue

from sdk import (
    DEFAULT_TTL_SECONDS,
    SHORT_DUPLICATE_WINDOW_SECONDS,
    Bus,
    Queues,
    Tag,
    body_of,
    result,
)

pytestmark = pytest.mark.integration

SCHEDULE_AHEAD = datetime.timedelta(seconds=2.5)


async def test_scheduled_messages_arrive_at_their_time_and_cancelled_ones_never(
    bus: Bus, queues: Queues
) -> None:
    tag = Tag()
    due = datetime.datetime.now(datetime.UTC) + SCHEDULE_AHEAD
    async with bus.sender(queues.plain) as sender:
        (kept,) = await result(sender.schedule_messages(tag.message(body="kept"), due))
        cancelled = await result(
            sender.schedule_messages([tag.message(body="c1"), tag.message(body="c2")], due)
        )
        # A plain send with a scheduled enqueue time is scheduled too.
        await result(
            sender.send_messages(tag.message(body="via-send", scheduled_enqueue_time_utc=due))
        )
        assert len(cancelled) == 2 and kept < cancelled[0] < cancelled[1]
        await result(sender.cancel_scheduled_messages(cancelled))

    async with bus.receiver(
        queues.plain, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
    ) as receiver:
        peeked = await tag.peek(receiver)
        peeked_before_due = datetime.datetime.now(datetime.UTC) < due
        assert sorted(body_of(m) for m in peeked) == [b"kept", b"via-send"]
        # The broker and this test read one clock: what the broker showed before the messages
        # were due must be scheduled; a busy machine may have made the peek late, and then
        # they may be active already.
        due_states = {ServiceBusMessageState.SCHEDULED}
        if not peeked_before_due:
            due_states.add(ServiceBusMessageState.ACTIVE)
        assert {m.state for m in peeked} <= due_states, [m.state for m in peeked]
        assert all(
            abs(m.scheduled_enqueue_time_utc - due) < datetime.timedelta(seconds=1) for m in peeked
        )
        assert kept in [m.sequence_number for m in peeked]

        early = await result(receiver.receive_messages(max_message_count=10, max_wait_time=0.5))
        early = [m for m in early if body_of(m) in (b"kept", b"via-send")]
        if datetime.datetime.now(datetime.UTC) < due:
            assert early == [], "a scheduled message was delivered before its time"

        received = early + await tag.receive(
            receiver, 2 - len(early), timeout=SCHEDULE_AHEAD.seconds + 4
        )
        assert sorted(body_of(m) for m in received) == [b"kept", b"via-send"]
        assert await tag.receive(receiver, 1, timeout=1) == []
        # By the broker's clock: enqueued at their time, whenever the test got to them.
        assert all(m.enqueued_time_utc >= due - datetime.timedelta(seconds=1) for m in received)


async def test_expired_messages_are_dead_lettered_when_the_queue_says_so(
    bus: Bus, queues: Queues
) -> None:
    tag = Tag()
    # conformance-expiring: DefaultMessageTimeToLive PT3S, DeadLetteringOnMessageExpiration.
    await bus.send(queues.expiring, tag.message(body="stale"))
    # conformance-plain keeps no expired messages anywhere.
    await bus.send(
        queues.plain, tag.message(body="gone", time_to_live=datetime.timedelta(seconds=1))
    )
    await asyncio.sleep(DEFAULT_TTL_SECONDS + 0.5)

    async with bus.receiver(queues.expiring, max_wait_time=1) as receiver:
        assert await tag.receive(receiver, 1, timeout=1) == []
    (dead_letter,) = await bus.take(queues.expiring, tag, 1, dead_letters=True)
    assert body_of(dead_letter) == b"stale"
    assert dead_letter.dead_letter_reason == "TTLExpiredException"

    async with bus.receiver(queues.plain, max_wait_time=1) as receiver:
        assert await tag.receive(receiver, 1, timeout=1) == []
    async with bus.receiver(queues.plain, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dead:
        assert await tag.peek(dead) == []


async def test_duplicate_message_ids_are_dropped_inside_the_window(
    bus: Bus, queues: Queues
) -> None:
    tag = Tag()
    async with bus.sender(queues.duplicates) as sender:
        await result(sender.send_messages(tag.message(body="first", message_id=f"order-{tag}")))
        await result(sender.send_messages(tag.message(body="again", message_id=f"order-{tag}")))
        await result(
            sender.send_messages(
                [
                    tag.message(body="in-batch", message_id=f"order-{tag}"),
                    tag.message(body="other", message_id=f"other-{tag}"),
                ]
            )
        )

    received = await bus.take(queues.duplicates, tag, 2, exactly=True)
    assert [body_of(m) for m in received] == [b"first", b"other"]


async def test_queues_without_duplicate_detection_keep_every_copy(bus: Bus, queues: Queues) -> None:
    tag = Tag()
    async with bus.sender(queues.plain) as sender:
        for body in ("one", "two"):
            await result(sender.send_messages(tag.message(body=body, message_id=f"same-{tag}")))

    received = await bus.take(queues.plain, tag, 2)
    assert [body_of(m) for m in received] == [b"one", b"two"]


async def test_a_duplicate_is_accepted_again_once_the_window_has_passed(
    bus: Bus, queues: Queues
) -> None:
    """DuplicateDetectionHistoryTimeWindow PT20S (the least Service Bus accepts): the same
    message id is dropped inside the window and accepted after it, which starts a new one."""
    tag = Tag()
    message_id = f"order-{tag}"
    async with bus.sender(queues.duplicates_short_window) as sender:
        await result(sender.send_messages(tag.message(body="first", message_id=message_id)))
        await result(sender.send_messages(tag.message(body="inside", message_id=message_id)))
        window_over = time.monotonic() + SHORT_DUPLICATE_WINDOW_SECONDS + 2
        await asyncio.sleep(window_over - time.monotonic())
        await result(sender.send_messages(tag.message(body="after", message_id=message_id)))
        await result(sender.send_messages(tag.message(body="after-again", message_id=message_id)))

    received = await bus.take(queues.duplicates_short_window, tag, 2, exactly=True)
    assert [body_of(m) for m in received] == [b"first", b"after"]
