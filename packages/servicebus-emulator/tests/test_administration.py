"""The SDK's administration client (sync and async) against the management API: queues,
topics, subscriptions and rules created, read, listed, updated and deleted at run time and
used at once over AMQP; runtime properties (counts); the errors Service Bus answers."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.servicebus.exceptions import MessagingEntityNotFoundError
from azure.servicebus.management import (
    CorrelationRuleFilter,
    SqlRuleAction,
    SqlRuleFilter,
    TrueRuleFilter,
)

from sdk import Bus, Queues, Subscription, Tag, body_of, result

pytestmark = pytest.mark.integration


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


async def items(paged: Any) -> list[Any]:
    """The items of an ItemPaged (sync) or AsyncItemPaged."""
    if hasattr(paged, "__aiter__"):
        return [item async for item in paged]
    return list(paged)


async def test_a_queue_is_created_used_updated_and_deleted(bus: Bus) -> None:
    name = unique("admin-queue")
    tag = Tag()
    async with bus.administration() as admin:
        created = await result(
            admin.create_queue(
                name,
                max_delivery_count=4,
                lock_duration=datetime.timedelta(seconds=20),
                requires_session=False,
                dead_lettering_on_message_expiration=True,
                user_metadata="made by a test",
            )
        )
        try:
            assert (created.name, created.max_delivery_count) == (name, 4)
            got = await result(admin.get_queue(name))
            assert got.lock_duration == datetime.timedelta(seconds=20)
            assert got.dead_lettering_on_message_expiration is True
            assert got.user_metadata == "made by a test"
            assert name in [q.name for q in await items(admin.list_queues())]

            await bus.send(name, tag.message(body="to a new queue"))
            (message,) = await bus.take(name, tag, 1)
            assert body_of(message) == b"to a new queue"

            got.max_delivery_count = 9
            await result(admin.update_queue(got))
            assert (await result(admin.get_queue(name))).max_delivery_count == 9
        finally:
            await result(admin.delete_queue(name))
        with pytest.raises(ResourceNotFoundError):
            await result(admin.get_queue(name))
    with pytest.raises(MessagingEntityNotFoundError):
        await bus.send(name, tag.message())


async def test_runtime_properties_count_a_queue_s_messages(bus: Bus) -> None:
    name = unique("admin-counts")
    tag = Tag()
    async with bus.administration() as admin:
        await result(admin.create_queue(name))
        try:
            later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
            async with bus.sender(name) as sender:
                await result(sender.send_messages([tag.message() for _ in range(3)]))
                await result(sender.schedule_messages(tag.message(), later))
            async with bus.receiver(name) as receiver:
                (message,) = await tag.receive(receiver, 1)
                await result(receiver.dead_letter_message(message, reason="counted"))

            counts = await result(admin.get_queue_runtime_properties(name))
            assert counts.active_message_count == 2
            assert counts.dead_letter_message_count == 1
            assert counts.scheduled_message_count == 1
            assert counts.total_message_count == 4
            assert counts.size_in_bytes > 0
            listed = {q.name: q for q in await items(admin.list_queues_runtime_properties())}
            assert listed[name].active_message_count == 2
        finally:
            await result(admin.delete_queue(name))


async def test_a_topic_subscriptions_and_rules_are_managed_and_applied(bus: Bus) -> None:
    topic = unique("admin-topic")
    tag = Tag()
    async with bus.administration() as admin:
        await result(
            admin.create_topic(topic, default_message_time_to_live=datetime.timedelta(hours=1))
        )
        try:
            await result(admin.create_subscription(topic, "everything"))
            await result(admin.create_subscription(topic, "chosen", max_delivery_count=3))
            rules = [r.name for r in await items(admin.list_rules(topic, "chosen"))]
            assert rules == ["$Default"]  # every new subscription starts with it
            await result(admin.delete_rule(topic, "chosen", "$Default"))
            await result(
                admin.create_rule(
                    topic,
                    "chosen",
                    "big",
                    filter=SqlRuleFilter("quantity > @limit", parameters={"@limit": 10}),
                    action=SqlRuleAction("SET checked = 'yes'"),
                )
            )
            await result(
                admin.create_rule(
                    topic, "chosen", "vip", filter=CorrelationRuleFilter(properties={"tier": "vip"})
                )
            )
            rule = await result(admin.get_rule(topic, "chosen", "big"))
            assert rule.filter.sql_expression == "quantity > @limit"
            assert rule.filter.parameters == {"@limit": 10}
            assert rule.action.sql_expression == "SET checked = 'yes'"
            assert sorted(s.name for s in await items(admin.list_subscriptions(topic))) == [
                "chosen",
                "everything",
            ]
            assert (await result(admin.get_topic_runtime_properties(topic))).subscription_count == 2

            await bus.send(
                topic,
                [
                    tag.message(body="small", application_properties={"quantity": 2}),
                    tag.message(body="big", application_properties={"quantity": 20}),
                    tag.message(body="vip", application_properties={"tier": "vip"}),
                ],
            )
            chosen = await bus.take(Subscription(topic, "chosen"), tag, 2, exactly=True)
            assert sorted(body_of(m) for m in chosen) == [b"big", b"vip"]
            big = next(m for m in chosen if body_of(m) == b"big")
            assert (big.application_properties or {}).get(b"checked") == b"yes"
            assert len(await bus.take(Subscription(topic, "everything"), tag, 3)) == 3

            # An update of a rule applies to the next message.
            rule.filter = TrueRuleFilter()
            await result(admin.update_rule(topic, "chosen", rule))
            await bus.send(topic, tag.message(body="any"))
            (updated,) = await bus.take(Subscription(topic, "chosen"), tag, 1)
            assert body_of(updated) == b"any"
        finally:
            await result(admin.delete_topic(topic))
        with pytest.raises(ResourceNotFoundError):
            await result(admin.get_subscription(topic, "chosen"))


async def test_the_management_api_answers_with_service_bus_s_errors(
    bus: Bus, queues: Queues
) -> None:
    async with bus.administration() as admin:
        with pytest.raises(ResourceExistsError):
            await result(admin.create_queue(queues.plain))
        with pytest.raises(ResourceNotFoundError):
            await result(admin.get_queue(unique("missing")))
        with pytest.raises(ResourceNotFoundError):
            await result(admin.delete_queue(unique("missing")))
        with pytest.raises(ResourceNotFoundError):
            await result(admin.get_subscription(unique("missing-topic"), "nothing"))
        topic = unique("admin-errors")
        await result(admin.create_topic(topic))
        try:
            await result(admin.create_subscription(topic, "s"))
            with pytest.raises(HttpResponseError) as refused:
                await result(
                    admin.create_rule(topic, "s", "bad", filter=SqlRuleFilter("color = 'red' AND"))
                )
            assert refused.value.status_code == 400
        finally:
            await result(admin.delete_topic(topic))


async def test_the_namespace_properties(bus: Bus) -> None:
    async with bus.administration() as admin:
        namespace = await result(admin.get_namespace_properties())
        assert namespace.name
        assert namespace.messaging_sku in ("Basic", "Standard", "Premium")
