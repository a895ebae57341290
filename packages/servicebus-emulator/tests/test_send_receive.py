"""Sending (single and batched), receiving in both modes, and what a received message carries."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import os

import pytest
from azure.servicebus import ServiceBusReceiveMode
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.amqp import AmqpAnnotatedMessage, AmqpMessageBodyType

from sdk import TAG, Bus, Queues, Tag, body_of, result

pytestmark = pytest.mark.integration


async def test_a_single_message_arrives_with_its_properties(bus: Bus, queues: Queues) -> None:
    tag = Tag()
    sent = tag.message(
        body='{"sku": "MUG-1"}',
        application_properties={"step": 3, "price": 9.5, "last": True},
        content_type="application/json",
        correlation_id=f"corr-{tag}",
        subject="ImportProduct",
        message_id=f"id-{tag}",
        reply_to="replies",
        to="somewhere",
    )
    before = datetime.datetime.now(datetime.UTC)

    await bus.send(queues.plain, sent)

    async with bus.receiver(queues.plain) as receiver:
        (received,) = await tag.receive(receiver, 1)
        assert body_of(received) == b'{"sku": "MUG-1"}'
        assert str(received.message_id) == f"id-{tag}"
        assert received.content_type == "application/json"
        assert received.correlation_id == f"corr-{tag}"
        assert received.subject == "ImportProduct"
        assert received.reply_to == "replies"
        assert received.to == "somewhere"
        properties = {
            (k.decode() if isinstance(k, bytes) else k): v
            for k, v in received.application_properties.items()
        }
        assert properties["step"] == 3
        assert properties["price"] == 9.5
        assert properties["last"] is True
        assert received.delivery_count == 0
        assert received.sequence_number > 0
        # Service Bus stamps the enqueue time when it accepts the message (clock skew: 5 s).
        assert received.enqueued_time_utc >= before - datetime.timedelta(seconds=5)
        assert received.enqueued_time_utc <= datetime.datetime.now(datetime.UTC)
        assert received.locked_until_utc > datetime.datetime.now(datetime.UTC)
        assert received.lock_token
        await result(receiver.complete_message(received))


async def test_a_batch_arrives_in_order_with_increasing_sequence_numbers(
    bus: Bus, queues: Queues
) -> None:
    tag = Tag()
    async with bus.sender(queues.plain) as sender:
        batch = await result(sender.create_message_batch())
        for n in range(10):
            batch.add_message(tag.message(body=f"batch-{n}"))
        await result(sender.send_messages(batch))
        # A list is sent as a batch too.
        await result(sender.send_messages([tag.message(body=f"list-{n}") for n in range(5)]))

    async with bus.receiver(queues.plain) as receiver:
        received = await tag.receive(receiver, 15)
        assert [body_of(m).decode() for m in received] == [f"batch-{n}" for n in range(10)] + [
            f"list-{n}" for n in range(5)
        ]
        numbers = [m.sequence_number for m in received]
        assert numbers == sorted(numbers) and len(set(numbers)) == 15
        for message in received:
            await result(receiver.complete_message(message))


async def test_receive_and_delete_removes_the_message_on_delivery(bus: Bus, queues: Queues) -> None:
    tag = Tag()
    await bus.send(queues.plain, [tag.message(body=f"m{n}") for n in range(3)])

    received = await bus.take(queues.plain, tag, 3, exactly=True)
    assert sorted(body_of(m) for m in received) == [b"m0", b"m1", b"m2"]


async def test_a_900_kib_message_round_trips_byte_for_byte(bus: Bus, queues: Queues) -> None:
    # Larger than the frame size, so it travels as a multi-frame transfer both ways.
    tag = Tag()
    payload = os.urandom(900 * 1024)
    await bus.send(queues.plain, tag.message(body=payload))

    async with bus.receiver(queues.plain) as receiver:
        (received,) = await tag.receive(receiver, 1)
        assert body_of(received) == payload
        await result(receiver.complete_message(received))


async def test_two_hundred_concurrent_connections(connection_string: str, queues: Queues) -> None:
    """200 async senders, each on its own connection, all open at the same time.

    At most 20 of them go through the handshake at once: the SDK's handshake is CPU work in
    this one event loop, and 200 at once on a busy 2-core machine took longer than the 30 s
    the emulator gives a new connection to finish it (``Connection.HANDSHAKE_TIMEOUT``: it
    closes such a connection, and the SDK reports "Server unexpectedly closed connection").
    Every connection stays open until all 200 have sent."""
    tag = Tag()
    count = 200
    all_open = asyncio.Barrier(count)
    handshaking = asyncio.Semaphore(20)

    async def send_one(n: int) -> None:
        async with contextlib.AsyncExitStack() as connection:
            async with handshaking:
                client = await connection.enter_async_context(
                    AsyncServiceBusClient.from_connection_string(connection_string, retry_total=0)
                )
                sender = await connection.enter_async_context(client.get_queue_sender(queues.plain))
                await sender.send_messages(tag.message(body=f"conn-{n}"))
            # Hold the connection until every other sender has sent on its own; the guard
            # covers 10 waves of 20 handshakes on a busy machine.
            await asyncio.wait_for(all_open.wait(), timeout=240)

    await asyncio.gather(*(send_one(n) for n in range(count)))

    async with (
        AsyncServiceBusClient.from_connection_string(connection_string, retry_total=0) as client,
        client.get_queue_receiver(
            queues.plain, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
        ) as receiver,
    ):
        received = await tag.receive(receiver, count, timeout=20)
    assert sorted(body_of(m).decode() for m in received) == sorted(
        f"conn-{n}" for n in range(count)
    )
    assert all(tag.owns(m) for m in received)


async def test_sequence_numbers_increase_across_sends(bus: Bus, queues: Queues) -> None:
    tag = Tag()
    async with bus.sender(queues.plain) as sender:
        for n in range(3):
            await result(sender.send_messages(tag.message(body=f"s{n}")))
    received = await bus.take(queues.plain, tag, 3)
    assert [body_of(m) for m in received] == [b"s0", b"s1", b"s2"]
    numbers = [m.sequence_number for m in received]
    assert numbers[0] < numbers[1] < numbers[2]
    assert [m.enqueued_time_utc for m in received] == sorted(m.enqueued_time_utc for m in received)


async def test_time_to_live_and_expiry_come_back_on_the_message(bus: Bus, queues: Queues) -> None:
    tag = Tag()
    await bus.send(queues.plain, tag.message(time_to_live=datetime.timedelta(minutes=10)))

    async with bus.receiver(queues.plain) as receiver:
        (received,) = await tag.receive(receiver, 1)
        assert received.time_to_live == datetime.timedelta(minutes=10)
        assert received.expires_at_utc == received.enqueued_time_utc + datetime.timedelta(
            minutes=10
        )
        await result(receiver.complete_message(received))


async def test_an_amqp_value_body_round_trips(bus: Bus, queues: Queues) -> None:
    tag = Tag()
    message = AmqpAnnotatedMessage(
        value_body={"sku": "MUG-1", "qty": 2, "tags": ["a", "b"]},
        application_properties={TAG: tag.id},
        properties={"message_id": f"value-{tag}"},
    )
    await bus.send(queues.plain, message)

    async with bus.receiver(queues.plain) as receiver:
        (received,) = await tag.receive(receiver, 1)
        assert received.body_type == AmqpMessageBodyType.VALUE
        # The SDK's decoder hands AMQP strings back as bytes.
        assert received.body == {b"sku": b"MUG-1", b"qty": 2, b"tags": [b"a", b"b"]}
        await result(receiver.complete_message(received))


async def test_a_message_sent_without_a_message_id_gets_one_from_the_broker(
    bus: Bus, queues: Queues
) -> None:
    """ServiceBusMessage always sets one; an AmqpAnnotatedMessage (like the JavaScript SDK's
    default) need not. Service Bus then assigns one, which the SDKs settle and renew by."""
    tag = Tag()
    await bus.send(
        queues.plain,
        [
            AmqpAnnotatedMessage(data_body=b"anonymous", application_properties={TAG: tag.id})
            for _ in range(2)
        ],
    )

    async with bus.receiver(queues.plain) as receiver:
        received = await tag.receive(receiver, 2)
        ids = [m.message_id for m in received]
        assert all(ids) and len(set(ids)) == 2, ids
        renewed = await result(receiver.renew_message_lock(received[0]))
        assert renewed >= received[0].locked_until_utc
        for message in received:
            await result(receiver.complete_message(message))


async def test_a_batch_of_almost_one_mib_round_trips(bus: Bus, queues: Queues) -> None:
    tag = Tag()
    payloads = [os.urandom(60 * 1024) for _ in range(15)]  # ~900 KiB in one transfer
    async with bus.sender(queues.plain) as sender:
        batch = await result(sender.create_message_batch())
        for payload in payloads:
            batch.add_message(tag.message(body=payload))
        await result(sender.send_messages(batch))

    received = await bus.take(queues.plain, tag, len(payloads))
    assert [body_of(m) for m in received] == payloads


async def test_competing_receivers_never_get_the_same_message(
    connection_string: str, queues: Queues
) -> None:
    tag = Tag()
    count = 120
    async with (
        AsyncServiceBusClient.from_connection_string(connection_string, retry_total=0) as client,
        client.get_queue_sender(queues.plain) as sender,
    ):
        await sender.send_messages([tag.message(body=f"c{n}") for n in range(count)])

    got: list[bytes] = []

    async def consume() -> None:
        async with (
            AsyncServiceBusClient.from_connection_string(connection_string, retry_total=0) as c,
            c.get_queue_receiver(queues.plain, max_wait_time=2) as receiver,
        ):
            while batch := await receiver.receive_messages(max_message_count=7, max_wait_time=2):
                for message in batch:
                    if tag.owns(message):
                        got.append(body_of(message))
                    await receiver.complete_message(message)

    await asyncio.gather(*(consume() for _ in range(4)))
    assert len(got) == count
    assert sorted(got) == sorted(f"c{n}".encode() for n in range(count))
