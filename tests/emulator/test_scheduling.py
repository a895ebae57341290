"""Scheduled messages, cancelling them, time-to-live expiry and duplicate detection."""

from __future__ import annotations

import asyncio
import datetime
import time

import pytest
from azure.servicebus import ServiceBusMessageState, ServiceBusReceiveMode, ServiceBusSubQueue

from .sdk import (
    DEFAULT_TTL_SECONDS,
    SHORT_DUPLICATE_WINDOW_SECONDS,
    Bus,
    Queues,
    body_of,
    new_tag,
    peek_tagged,
    receive_tagged,
    result,
    tagged,
)

pytestmark = pytest.mark.integration

SCHEDULE_AHEAD = datetime.timedelta(seconds=2.5)


async def test_scheduled_messages_arrive_at_their_time_and_cancelled_ones_never(
    bus: Bus, queues: Queues
) -> None:
    tag = new_tag()
    due = datetime.datetime.now(datetime.UTC) + SCHEDULE_AHEAD
    async with bus.sender(queues.plain) as sender:
        (kept,) = await result(sender.schedule_messages(tagged(tag, body="kept"), due))
        cancelled = await result(
            sender.schedule_messages([tagged(tag, body="c1"), tagged(tag, body="c2")], due)
        )
        # A plain send with a scheduled enqueue time is scheduled too.
        await result(
            sender.send_messages(tagged(tag, body="via-send", scheduled_enqueue_time_utc=due))
        )
        assert len(cancelled) == 2 and kept < cancelled[0] < cancelled[1]
        await result(sender.cancel_scheduled_messages(cancelled))

    async with bus.receiver(
        queues.plain, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
    ) as receiver:
        peeked = await peek_tagged(receiver, tag)
        assert sorted(body_of(m) for m in peeked) == [b"kept", b"via-send"]
        assert all(m.state == ServiceBusMessageState.SCHEDULED for m in peeked)
        assert all(
            abs(m.scheduled_enqueue_time_utc - due) < datetime.timedelta(seconds=1) for m in peeked
        )
        assert kept in [m.sequence_number for m in peeked]

        early = await result(receiver.receive_messages(max_message_count=10, max_wait_time=0.5))
        assert [m for m in early if body_of(m) in (b"kept", b"via-send")] == []

        received = await receive_tagged(receiver, tag, 2, timeout=SCHEDULE_AHEAD.seconds + 4)
        assert sorted(body_of(m) for m in received) == [b"kept", b"via-send"]
        assert await receive_tagged(receiver, tag, 1, timeout=1) == []
        assert all(m.enqueued_time_utc >= due - datetime.timedelta(seconds=1) for m in received)


async def test_expired_messages_are_dead_lettered_when_the_queue_says_so(
    bus: Bus, queues: Queues
) -> None:
    tag = new_tag()
    # conformance-expiring: DefaultMessageTimeToLive PT3S, DeadLetteringOnMessageExpiration.
    await bus.send(queues.expiring, tagged(tag, body="stale"))
    # conformance-plain keeps no expired messages anywhere.
    await bus.send(
        queues.plain, tagged(tag, body="gone", time_to_live=datetime.timedelta(seconds=1))
    )
    await asyncio.sleep(DEFAULT_TTL_SECONDS + 0.5)

    async with bus.receiver(queues.expiring, max_wait_time=1) as receiver:
        assert await receive_tagged(receiver, tag, 1, timeout=1) == []
    async with bus.receiver(
        queues.expiring,
        sub_queue=ServiceBusSubQueue.DEAD_LETTER,
        receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE,
    ) as dead:
        (dead_letter,) = await receive_tagged(dead, tag, 1)
        assert body_of(dead_letter) == b"stale"
        assert dead_letter.dead_letter_reason == "TTLExpiredException"

    async with bus.receiver(queues.plain, max_wait_time=1) as receiver:
        assert await receive_tagged(receiver, tag, 1, timeout=1) == []
    async with bus.receiver(queues.plain, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dead:
        assert await peek_tagged(dead, tag) == []


async def test_duplicate_message_ids_are_dropped_inside_the_window(
    bus: Bus, queues: Queues
) -> None:
    tag = new_tag()
    async with bus.sender(queues.duplicates) as sender:
        await result(sender.send_messages(tagged(tag, body="first", message_id=f"order-{tag}")))
        await result(sender.send_messages(tagged(tag, body="again", message_id=f"order-{tag}")))
        await result(
            sender.send_messages(
                [
                    tagged(tag, body="in-batch", message_id=f"order-{tag}"),
                    tagged(tag, body="other", message_id=f"other-{tag}"),
                ]
            )
        )

    async with bus.receiver(
        queues.duplicates, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
    ) as receiver:
        received = await receive_tagged(receiver, tag, 2)
        assert [body_of(m) for m in received] == [b"first", b"other"]
        assert await receive_tagged(receiver, tag, 1, timeout=1) == []


async def test_queues_without_duplicate_detection_keep_every_copy(bus: Bus, queues: Queues) -> None:
    tag = new_tag()
    async with bus.sender(queues.plain) as sender:
        for body in ("one", "two"):
            await result(sender.send_messages(tagged(tag, body=body, message_id=f"same-{tag}")))

    async with bus.receiver(
        queues.plain, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
    ) as receiver:
        received = await receive_tagged(receiver, tag, 2)
        assert [body_of(m) for m in received] == [b"one", b"two"]


async def test_a_duplicate_is_accepted_again_once_the_window_has_passed(
    bus: Bus, queues: Queues
) -> None:
    """DuplicateDetectionHistoryTimeWindow PT20S (the least Service Bus accepts): the same
    message id is dropped inside the window and accepted after it, which starts a new one."""
    tag = new_tag()
    message_id = f"order-{tag}"
    async with bus.sender(queues.duplicates_short_window) as sender:
        await result(sender.send_messages(tagged(tag, body="first", message_id=message_id)))
        await result(sender.send_messages(tagged(tag, body="inside", message_id=message_id)))
        window_over = time.monotonic() + SHORT_DUPLICATE_WINDOW_SECONDS + 2
        await asyncio.sleep(window_over - time.monotonic())
        await result(sender.send_messages(tagged(tag, body="after", message_id=message_id)))
        await result(sender.send_messages(tagged(tag, body="after-again", message_id=message_id)))

    async with bus.receiver(
        queues.duplicates_short_window, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
    ) as receiver:
        received = await receive_tagged(receiver, tag, 2)
        assert [body_of(m) for m in received] == [b"first", b"after"]
        assert await receive_tagged(receiver, tag, 1, timeout=1) == []
