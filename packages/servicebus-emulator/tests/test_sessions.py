"""Sessions: named and next-available receivers, FIFO, state, lock renewal, lock loss, errors."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusSubQueue
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.exceptions import (
    OperationTimeoutError,
    SessionCannotBeLockedError,
    SessionLockLostError,
)

from sdk import SHORT_LOCK_SECONDS, Bus, Queues, Tag, body_of, opened, result

pytestmark = pytest.mark.integration


async def send_to_sessions(bus: Bus, queue: str, tag: Tag, sessions: list[str], per: int) -> None:
    """``per`` messages to each session, interleaved across sessions, one send each."""
    async with bus.sender(queue) as sender:
        for n in range(per):
            for session in sessions:
                await result(
                    sender.send_messages(tag.message(body=f"{session}:{n}", session_id=session))
                )


async def drain(receiver: Any) -> None:
    while batch := await result(receiver.receive_messages(max_message_count=50, max_wait_time=1)):
        for message in batch:
            await result(receiver.complete_message(message))


@asynccontextmanager
async def next_available(bus: Bus, queue: str, mine: set[str]) -> AsyncIterator[Any]:
    """A next-available session receiver that got one of ``mine``; sessions other tests left
    behind are drained on the way."""
    for _ in range(20):
        async with bus.receiver(queue, session_id=NEXT_AVAILABLE_SESSION) as receiver:
            if receiver.session.session_id in mine:
                yield receiver
                return
            await drain(receiver)
    raise AssertionError(f"no session of {sorted(mine)} was offered")


async def test_a_named_session_receiver_gets_its_session_in_order(bus: Bus, queues: Queues) -> None:
    tag = Tag()
    first, second = f"a-{tag}", f"b-{tag}"
    await send_to_sessions(bus, queues.sessions, tag, [first, second], per=5)

    for session in (second, first):
        async with bus.receiver(queues.sessions, session_id=session) as receiver:
            assert receiver.session.session_id == session
            assert receiver.session.locked_until_utc > datetime.datetime.now(datetime.UTC)
            received = await tag.receive(receiver, 5)
            assert [body_of(m).decode() for m in received] == [f"{session}:{n}" for n in range(5)]
            assert {m.session_id for m in received} == {session}
            for message in received:
                await result(receiver.complete_message(message))
            assert await tag.receive(receiver, 1, timeout=1) == []


async def test_next_available_locks_a_session_with_messages(bus: Bus, queues: Queues) -> None:
    tag = Tag()
    sessions = [f"n{i}-{tag}" for i in range(2)]
    await send_to_sessions(bus, queues.sessions, tag, sessions, per=3)

    seen: list[str] = []
    for _ in sessions:
        async with next_available(bus, queues.sessions, set(sessions) - set(seen)) as receiver:
            session = receiver.session.session_id
            received = await tag.receive(receiver, 3)
            assert [body_of(m).decode() for m in received] == [f"{session}:{n}" for n in range(3)]
            for message in received:
                await result(receiver.complete_message(message))
            seen.append(session)
    assert sorted(seen) == sorted(sessions)


async def test_next_available_times_out_when_no_session_has_messages(
    bus: Bus, queues: Queues
) -> None:
    with pytest.raises(OperationTimeoutError):
        async with bus.receiver(
            queues.sessions_idle, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=1
        ) as receiver:
            await result(receiver.receive_messages(max_wait_time=1))


async def test_session_state_is_set_read_and_cleared(bus: Bus, queues: Queues) -> None:
    session = f"state-{Tag()}"
    async with bus.receiver(queues.sessions, session_id=session) as receiver:
        assert await result(receiver.session.get_state()) is None
        await result(receiver.session.set_state(b'{"step": 2}'))
        assert await result(receiver.session.get_state()) == b'{"step": 2}'

    # The state outlives the receiver that wrote it.
    async with bus.receiver(queues.sessions, session_id=session) as receiver:
        assert await result(receiver.session.get_state()) == b'{"step": 2}'
        await result(receiver.session.set_state(None))
        assert await result(receiver.session.get_state()) is None


async def test_list_sessions_shows_sessions_with_messages(bus: Bus, queues: Queues) -> None:
    tag = Tag()
    sessions = [f"l{i}-{tag}" for i in range(2)]
    async with opened(bus.client()) as client:
        if not hasattr(client, "list_queue_sessions"):
            pytest.skip("this azure-servicebus has no list_queue_sessions")
    await send_to_sessions(bus, queues.sessions, tag, sessions, per=1)

    async with opened(bus.client()) as client:
        paged = client.list_queue_sessions(queues.sessions)
        listed = [s async for s in paged] if hasattr(paged, "__aiter__") else list(paged)
    assert set(sessions) <= set(listed)

    for session in sessions:
        async with bus.receiver(queues.sessions, session_id=session) as receiver:
            await drain(receiver)


async def test_a_session_locked_elsewhere_cannot_be_locked(bus: Bus, queues: Queues) -> None:
    tag = Tag()
    session = f"busy-{tag}"
    await bus.send(queues.sessions, tag.message(session_id=session))

    async with bus.receiver(queues.sessions, session_id=session) as holder:
        with pytest.raises(SessionCannotBeLockedError):
            async with bus.receiver(queues.sessions, session_id=session) as other:
                await result(other.receive_messages(max_wait_time=1))
        (message,) = await tag.receive(holder, 1)
        await result(holder.complete_message(message))

    # Released with the link that held it.
    async with bus.receiver(queues.sessions, session_id=session) as receiver:
        assert receiver.session.session_id == session


async def test_a_session_lock_lasts_while_renewed_and_is_lost_when_not(
    bus: Bus, queues: Queues
) -> None:
    """conformance-sessions-short-lock: LockDuration PT5S."""
    tag = Tag()
    session = f"lock-{tag}"
    await send_to_sessions(bus, queues.sessions_short_lock, tag, [session], per=2)

    async with bus.receiver(queues.sessions_short_lock, session_id=session) as receiver:
        first_lock = receiver.session.locked_until_utc
        (first,) = await tag.receive(receiver, 1)
        await asyncio.sleep(SHORT_LOCK_SECONDS * 0.6)
        renewed = await result(receiver.session.renew_lock())
        assert renewed > first_lock
        assert receiver.session.locked_until_utc == renewed
        await asyncio.sleep(SHORT_LOCK_SECONDS * 0.5)  # past the first lock
        await result(receiver.complete_message(first))

        (second,) = await tag.receive(receiver, 1)
        await asyncio.sleep(SHORT_LOCK_SECONDS + 0.5)  # no renewal this time
        with pytest.raises(SessionLockLostError):
            await result(receiver.complete_message(second))

    # Someone else may take the session now; the unsettled message comes back to them.
    async with bus.receiver(queues.sessions_short_lock, session_id=session) as receiver:
        (again,) = await tag.receive(receiver, 1)
        assert again.sequence_number == second.sequence_number
        assert again.delivery_count == 1
        await result(receiver.complete_message(again))


async def test_an_abandoned_session_message_comes_back_first(bus: Bus, queues: Queues) -> None:
    tag = Tag()
    session = f"abandon-{tag}"
    await send_to_sessions(bus, queues.sessions, tag, [session], per=3)

    async with bus.receiver(queues.sessions, session_id=session) as receiver:
        (first,) = await tag.receive(receiver, 1)
        await result(receiver.abandon_message(first))
        received = await tag.receive(receiver, 3)
        assert [body_of(m).decode() for m in received] == [f"{session}:{n}" for n in range(3)]
        assert [m.delivery_count for m in received] == [1, 0, 0]
        for message in received:
            await result(receiver.complete_message(message))


async def test_dead_letters_of_a_session_queue_are_read_without_a_session(
    bus: Bus, queues: Queues
) -> None:
    """The dead-letter queue of a session queue is not session-enabled; the session id stays
    on the message (the app's dead-letter archive relies on both)."""
    tag = Tag()
    session = f"dead-{tag}"
    await bus.send(queues.sessions, tag.message(body="poison", session_id=session))

    async with bus.receiver(queues.sessions, session_id=session) as receiver:
        (message,) = await tag.receive(receiver, 1)
        await result(
            receiver.dead_letter_message(message, reason="Poison", error_description="step 2")
        )

    async with bus.receiver(queues.sessions, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dead:
        (dead_letter,) = await tag.receive(dead, 1)
        assert dead_letter.session_id == session
        assert dead_letter.dead_letter_reason == "Poison"
        assert dead_letter.dead_letter_error_description == "step 2"
        await result(dead.complete_message(dead_letter))


async def test_next_available_waits_for_a_session_that_shows_up(bus: Bus, queues: Queues) -> None:
    tag = Tag()
    session = f"late-{tag}"

    async def send_later() -> None:
        await asyncio.sleep(1.5)
        # Async, whatever the flavour under test, so it can send while the receiver waits.
        async with (
            AsyncServiceBusClient.from_connection_string(bus.connection_string) as client,
            client.get_queue_sender(queues.sessions_idle) as sender,
        ):
            await sender.send_messages(tag.message(body="late", session_id=session))

    sending = asyncio.create_task(send_later())
    try:
        if bus.kind == "sync":
            # The sync receiver blocks the loop while it waits: open it in a thread.
            def receive_sync() -> list[bytes]:
                with (
                    bus.client() as client,
                    client.get_queue_receiver(
                        queues.sessions_idle, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=10
                    ) as receiver,
                ):
                    assert receiver.session.session_id == session
                    messages = receiver.receive_messages(max_wait_time=5)
                    for message in messages:
                        receiver.complete_message(message)
                    return [body_of(m) for m in messages]

            bodies = await asyncio.to_thread(receive_sync)
        else:
            async with bus.receiver(
                queues.sessions_idle, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=10
            ) as receiver:
                assert receiver.session.session_id == session
                messages = await receiver.receive_messages(max_wait_time=5)
                for message in messages:
                    await receiver.complete_message(message)
                bodies = [body_of(m) for m in messages]
    finally:
        await sending
    assert bodies == [b"late"]


async def test_a_session_receiver_peeks_and_defers_within_its_session(
    bus: Bus, queues: Queues
) -> None:
    tag = Tag()
    mine, other = f"peek-{tag}", f"other-{tag}"
    await send_to_sessions(bus, queues.sessions, tag, [mine, other], per=2)

    async with bus.receiver(queues.sessions, session_id=mine) as receiver:
        peeked = await result(receiver.peek_messages(max_message_count=10))
        assert [body_of(m).decode() for m in peeked] == [f"{mine}:0", f"{mine}:1"]

        first, second = await tag.receive(receiver, 2)
        await result(receiver.defer_message(first))
        await result(receiver.complete_message(second))
        (deferred,) = await result(receiver.receive_deferred_messages([first.sequence_number]))
        assert body_of(deferred).decode() == f"{mine}:0"
        await result(receiver.complete_message(deferred))

    async with bus.receiver(queues.sessions, session_id=other) as receiver:
        await drain(receiver)


async def test_a_scheduled_message_arrives_in_its_session(bus: Bus, queues: Queues) -> None:
    tag = Tag()
    session = f"scheduled-{tag}"
    due = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=1.5)
    async with bus.sender(queues.sessions) as sender:
        await result(sender.schedule_messages(tag.message(body="s", session_id=session), due))

    async with bus.receiver(queues.sessions, session_id=session) as receiver:
        (message,) = await tag.receive(receiver, 1, timeout=6)
        assert message.session_id == session
        assert message.enqueued_time_utc >= due - datetime.timedelta(seconds=1)
        await result(receiver.complete_message(message))
