"""Topics and subscriptions: fan-out, rules (the $Default rule, correlation filters field by
field, SQL filters and actions, one copy per rule with an action), sessions, dead letters and
forwarding per subscription, and messages scheduled on a topic."""

from __future__ import annotations

import asyncio
import datetime

import pytest
from azure.servicebus import NEXT_AVAILABLE_SESSION
from azure.servicebus.exceptions import ServiceBusError

from sdk import SHORT_LOCK_SECONDS, Bus, Queues, Tag, Topics, body_of, result

pytestmark = pytest.mark.integration


def props(message: object) -> dict[str, object]:
    """Application properties with str keys and values (the SDK hands back bytes)."""
    raw = getattr(message, "application_properties", None) or {}
    decode = lambda v: v.decode() if isinstance(v, bytes) else v  # noqa: E731
    return {decode(k): decode(v) for k, v in raw.items()}


async def test_every_subscription_gets_its_own_copy(bus: Bus, topics: Topics) -> None:
    tag = Tag()
    await bus.send(
        topics.main,
        [
            tag.message(body="red one", application_properties={"color": "red"}),
            tag.message(body="green one", application_properties={"color": "green"}),
        ],
    )

    every = topics.main.subscription("all")
    async with bus.receiver(every) as receiver:
        received = await tag.receive(receiver, 2)
        assert [body_of(m) for m in received] == [b"red one", b"green one"]
        for message in received:
            await result(receiver.complete_message(message))
    # Completing in one subscription leaves the other's copy where it is.
    red = await bus.take(topics.main.subscription("red"), tag, 1, exactly=True)
    assert [body_of(m) for m in red] == [b"red one"]
    assert red[0].message_id == received[0].message_id


CORRELATION_FIELDS = {
    "correlation_id": "cid-conformance",
    "message_id": "mid-conformance",
    "to": "to-conformance",
    "reply_to": "reply-to-conformance",
    "subject": "label-conformance",
    "session_id": "session-conformance",
    "reply_to_session_id": "reply-session-conformance",
    "content_type": "application/x-conformance",
}


async def test_a_correlation_filter_matches_on_each_of_its_fields(bus: Bus, topics: Topics) -> None:
    """The subscription "fields" has one rule per CorrelationFilter field (and one on two user
    properties): each message below matches exactly one of them, the last one none."""
    tag = Tag()
    sent = [
        tag.message(body=field, **{field: value}) for field, value in CORRELATION_FIELDS.items()
    ]
    sent.append(
        tag.message(body="properties", application_properties={"kind": "conformance", "size": 3})
    )
    sent.append(tag.message(body="half", application_properties={"kind": "conformance", "size": 4}))
    sent.append(tag.message(body="none", correlation_id="other", subject="other", to="other"))
    await bus.send(topics.main, sent)

    received = await bus.take(topics.main.subscription("fields"), tag, 9, exactly=True)
    assert sorted(body_of(m).decode() for m in received) == sorted(
        [*CORRELATION_FIELDS, "properties"]
    )


async def test_a_correlation_filter_needs_all_of_its_fields(bus: Bus, topics: Topics) -> None:
    tag = Tag()
    await bus.send(
        topics.main,
        [
            tag.message(body="id only", correlation_id="both-cid"),
            tag.message(body="label only", subject="both-label"),
            tag.message(body="both", correlation_id="both-cid", subject="both-label"),
        ],
    )
    received = await bus.take(topics.main.subscription("both"), tag, 1, exactly=True)
    assert [body_of(m) for m in received] == [b"both"]


async def test_a_sql_filter_selects_and_its_action_changes_the_copy(
    bus: Bus, topics: Topics
) -> None:
    """sql: quantity > 10 AND sys.Label LIKE 'order%'; SET priority = 'high'; REMOVE internal"""
    tag = Tag()
    await bus.send(
        topics.main,
        [
            tag.message(body="small", subject="order-1", application_properties={"quantity": 5}),
            tag.message(
                body="big",
                subject="order-2",
                application_properties={"quantity": 20, "internal": "x", "other": "kept"},
            ),
            tag.message(body="no label", subject="misc", application_properties={"quantity": 50}),
            tag.message(body="no quantity", subject="order-3"),
        ],
    )

    (big,) = await bus.take(topics.main.subscription("sql"), tag, 1, exactly=True)
    assert body_of(big) == b"big"
    assert big.subject == "order-2"
    properties = props(big)
    assert properties["priority"] == "high"
    assert properties["other"] == "kept"
    assert properties["RuleName"] == "big-orders"
    assert "internal" not in properties
    # The message as sent is unchanged in the other subscriptions.
    everything = await bus.take(topics.main.subscription("all"), tag, 4)
    assert "priority" not in props(next(m for m in everything if body_of(m) == b"big"))


async def test_each_rule_with_an_action_gives_a_copy_and_the_others_one_between_them(
    bus: Bus, topics: Topics
) -> None:
    """copies: blue (correlation) and large (SQL) without actions, first and second with
    actions; a message all four match arrives three times."""
    tag = Tag()
    await bus.send(
        topics.main, tag.message(body="all", application_properties={"color": "blue", "size": "L"})
    )
    received = await bus.take(topics.main.subscription("copies"), tag, 3, exactly=True)
    copies = sorted(f"{props(m).get('RuleName')}: {props(m).get('copy')}" for m in received)
    assert copies == ["None: None", "first: first", "second: second"]
    assert {body_of(m) for m in received} == {b"all"}


async def test_a_session_subscription_hands_out_sessions(bus: Bus, topics: Topics) -> None:
    tag = Tag()
    session = f"topic-session-{tag}"
    await bus.send(
        topics.sessions, [tag.message(body=f"s{n}", session_id=session) for n in range(3)]
    )

    async with bus.receiver(topics.sessions.subscription("sessions"), session_id=session) as r:
        assert r.session.session_id == session
        received = await tag.receive(r, 3)
        assert [body_of(m) for m in received] == [b"s0", b"s1", b"s2"]
        await result(r.session.set_state(b"seen"))
        assert await result(r.session.get_state()) == b"seen"
        for message in received:
            await result(r.complete_message(message))
    plain = await bus.take(topics.sessions.subscription("plain"), tag, 3)
    assert {m.session_id for m in plain} == {session}


async def test_a_next_available_session_receiver_works_on_a_subscription(
    bus: Bus, topics: Topics
) -> None:
    tag = Tag()
    session = f"next-{tag}"
    await bus.send(topics.sessions, tag.message(session_id=session))
    for _ in range(10):
        async with bus.receiver(
            topics.sessions.subscription("sessions"), session_id=NEXT_AVAILABLE_SESSION
        ) as receiver:
            messages = await tag.receive(receiver, 1, timeout=2)
            for message in messages:
                await result(receiver.complete_message(message))
            if messages:
                assert receiver.session.session_id == session
                break
    else:
        raise AssertionError("the session never came")
    await bus.take(topics.sessions.subscription("plain"), tag, 1)


async def test_dead_letters_stay_in_their_subscription(bus: Bus, topics: Topics) -> None:
    tag = Tag()
    await bus.send(topics.main, tag.message(application_properties={"color": "red"}))

    async with bus.receiver(topics.main.subscription("red")) as receiver:
        (message,) = await tag.receive(receiver, 1)
        await result(receiver.dead_letter_message(message, reason="Red", error_description="no"))
    (letter,) = await bus.take(topics.main.subscription("red"), tag, 1, dead_letters=True)
    assert (letter.dead_letter_reason, letter.dead_letter_error_description) == ("Red", "no")
    assert (
        await bus.take(topics.main.subscription("all"), tag, 1, dead_letters=True, timeout=1) == []
    )
    await bus.take(topics.main.subscription("all"), tag, 1)


async def test_lock_expiry_in_a_subscription_dead_letters_at_its_max_delivery_count(
    bus: Bus, topics: Topics
) -> None:
    """kept: LockDuration PT5S, MaxDeliveryCount 2."""
    tag = Tag()
    await bus.send(topics.forward, tag.message(body="slow"))
    kept = topics.forward.subscription("kept")
    async with bus.receiver(kept) as receiver:
        (first,) = await tag.receive(receiver, 1)
        await result(receiver.abandon_message(first))
        (second,) = await tag.receive(receiver, 1)
        assert second.delivery_count == 1
        await asyncio.sleep(SHORT_LOCK_SECONDS + 0.5)
        assert await tag.receive(receiver, 1, timeout=1) == []
    (letter,) = await bus.take(kept, tag, 1, dead_letters=True)
    assert letter.dead_letter_reason == "MaxDeliveryCountExceeded"


async def test_forward_to_moves_a_subscription_s_messages_to_a_queue(
    bus: Bus, topics: Topics
) -> None:
    tag = Tag()
    await bus.send(topics.forward, tag.message(body="onwards"))
    (forwarded,) = await bus.take(topics.forwarded_queue, tag, 1)
    assert body_of(forwarded) == b"onwards"
    assert await bus.take(topics.forward.subscription("to-queue"), tag, 1, timeout=1) == []
    await bus.take(topics.forward.subscription("kept"), tag, 1)


async def test_a_message_scheduled_on_a_topic_fans_out_when_due(bus: Bus, topics: Topics) -> None:
    tag = Tag()
    due = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=3)
    async with bus.sender(topics.main) as sender:
        (kept,) = await result(sender.schedule_messages(tag.message(body="later"), due))
        (cancelled,) = await result(sender.schedule_messages(tag.message(body="never"), due))
        await result(sender.cancel_scheduled_messages(cancelled))
        assert cancelled != kept

    async with bus.receiver(topics.main.subscription("all")) as receiver:
        (message,) = await tag.receive(receiver, 1, timeout=10)
        assert datetime.datetime.now(datetime.UTC) >= due - datetime.timedelta(seconds=1)
        assert body_of(message) == b"later"
        assert message.enqueued_time_utc >= due - datetime.timedelta(seconds=1)
        await result(receiver.complete_message(message))
        assert await tag.receive(receiver, 1, timeout=1) == []


async def test_receiving_from_a_topic_is_refused(bus: Bus, topics: Topics, queues: Queues) -> None:
    with pytest.raises(ServiceBusError):
        async with bus.receiver(topics.main.name, max_wait_time=1) as receiver:
            await result(receiver.receive_messages(max_wait_time=1))
