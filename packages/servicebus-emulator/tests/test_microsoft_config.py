"""The Config.json Microsoft's emulator documentation ships (microsoft-config.json here, copied
unchanged from Azure/azure-service-bus-emulator-installer, ServiceBus-Emulator/Config/, // comments
and all) loads and serves what it declares: queue.1, and topic.1 whose subscriptions filter on
the content type (subscription.1), a user property (subscription.2), nothing (subscription.3,
the $Default rule) and a SQL filter with an action (subscription.4)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sdk import Bus, Subscription, Tag, body_of, result
from servicebus_emulator.testing import run_emulator

pytestmark = pytest.mark.integration

CONFIG = Path(__file__).with_name("microsoft-config.json")


@pytest.fixture(scope="module")
def documented() -> Iterator[Any]:
    with run_emulator(CONFIG) as emu:
        yield emu


@pytest.fixture(params=["sync", "async"])
def bus_of_the_documented_config(request: pytest.FixtureRequest, documented: Any) -> Bus:
    return Bus(request.param, documented.connection_string, (documented.host, documented.http_port))


async def test_queue_1_sends_and_receives(bus_of_the_documented_config: Bus) -> None:
    bus, tag = bus_of_the_documented_config, Tag()
    await bus.send("queue.1", tag.message(body="Hello, Azure Service Bus!"))
    (message,) = await bus.take("queue.1", tag, 1)
    assert body_of(message) == b"Hello, Azure Service Bus!"


async def test_topic_1_s_subscriptions_select_as_their_rules_say(
    bus_of_the_documented_config: Bus,
) -> None:
    bus, tag = bus_of_the_documented_config, Tag()
    await bus.send(
        "topic.1",
        [
            tag.message(body="json", content_type="application/json"),
            tag.message(body="prop1", application_properties={"prop1": "value1"}),
            tag.message(
                body="sql", message_id="123456", application_properties={"userProp1": "value1"}
            ),
            tag.message(body="plain"),
        ],
    )

    def subscription(n: int) -> Subscription:
        return Subscription("topic.1", f"subscription.{n}")

    assert [body_of(m) for m in await bus.take(subscription(1), tag, 1, exactly=True)] == [b"json"]
    assert [body_of(m) for m in await bus.take(subscription(2), tag, 1, exactly=True)] == [b"prop1"]
    everything = await bus.take(subscription(3), tag, 4, exactly=True)
    assert [body_of(m) for m in everything] == [b"json", b"prop1", b"sql", b"plain"]
    (selected,) = await bus.take(subscription(4), tag, 1, exactly=True)
    assert body_of(selected) == b"sql"
    assert selected.to == "Entity"  # the rule's action: SET sys.To = 'Entity'


async def test_the_administration_client_sees_the_documented_rules(
    bus_of_the_documented_config: Bus,
) -> None:
    async with bus_of_the_documented_config.administration() as admin:
        rule = await result(admin.get_rule("topic.1", "subscription.4", "sql-filter-1"))
        assert rule.filter.sql_expression == "sys.MessageId = '123456' AND userProp1 = 'value1'"
        assert rule.action.sql_expression == "SET sys.To = 'Entity'"
