"""The emulator's config loader: the official emulator's config.json, topics included."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest

from servicebus_emulator import config

MICROSOFT_CONFIG = Path(__file__).with_name("microsoft-config.json")


def official_config_with_a_topic() -> dict[str, Any]:
    """The layout of Microsoft's emulator Config.json, with a topic, its subscriptions and a
    rule, next to two queues."""
    return {
        "UserConfig": {
            "Namespaces": [
                {
                    "Name": "sbemulatorns",
                    "Queues": [
                        {
                            "Name": "orders",
                            "Properties": {
                                "RequiresSession": True,
                                "LockDuration": "PT1M",
                                "MaxDeliveryCount": 5,
                                "ForwardDeadLetteredMessagesTo": "orders-dead",
                            },
                        },
                        {"Name": "orders-dead", "Properties": {"RequiresSession": False}},
                    ],
                    "Topics": [
                        {
                            "Name": "price-changes",
                            "Properties": {
                                "DefaultMessageTimeToLive": "PT1H",
                                "DuplicateDetectionHistoryTimeWindow": "PT20S",
                                "RequiresDuplicateDetection": False,
                            },
                            "Subscriptions": [
                                {
                                    "Name": "catalog",
                                    "Properties": {
                                        "DeadLetteringOnMessageExpiration": False,
                                        "DefaultMessageTimeToLive": "PT1H",
                                        "LockDuration": "PT1M",
                                        "MaxDeliveryCount": 10,
                                        "ForwardDeadLetteredMessagesTo": "",
                                        "ForwardTo": "",
                                        "RequiresSession": False,
                                    },
                                    "Rules": [
                                        {
                                            "Name": "only-eur",
                                            "Properties": {
                                                "FilterType": "Correlation",
                                                "CorrelationFilter": {
                                                    "Properties": {"currency": "EUR"}
                                                },
                                            },
                                        }
                                    ],
                                }
                            ],
                        }
                    ],
                }
            ],
            "Logging": {"Type": "File"},
        }
    }


def test_a_config_with_topics_loads_queues_topics_subscriptions_and_rules(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger=config.__name__):
        namespace = config.load(official_config_with_a_topic())

    assert [q.name for q in namespace.queues] == ["orders", "orders-dead"]
    orders = namespace.queues[0]
    assert orders.requires_session is True
    assert orders.lock_duration_ms == 60_000
    assert orders.max_delivery_count == 5
    assert orders.forward_dead_lettered_to == "orders-dead"
    assert namespace.queues[1].requires_session is False
    (topic,) = namespace.topics
    assert topic.name == "price-changes"
    assert topic.settings.default_ttl_ms == 3_600_000
    (catalog,) = topic.subscriptions
    assert catalog.name == "catalog"
    assert catalog.settings.max_delivery_count == 10
    (rule,) = catalog.rules
    assert (rule.name, rule.filter_type, rule.properties) == (
        "only-eur",
        "CorrelationFilter",
        {"currency": "EUR"},
    )
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_a_subscription_without_rules_gets_the_default_rule() -> None:
    document = official_config_with_a_topic()
    del document["UserConfig"]["Namespaces"][0]["Topics"][0]["Subscriptions"][0]["Rules"]
    (catalog,) = config.load(document).topics[0].subscriptions
    assert [(r.name, r.filter_type) for r in catalog.rules] == [("$Default", "TrueFilter")]


def test_a_config_with_comments_loads(tmp_path: Path) -> None:
    """Microsoft's documentation ships its Config.json with // comments in it."""
    path = tmp_path / "Config.json"
    path.write_text(
        '{"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", // the only name allowed\n'
        '"Queues": [{"Name": "q//1", "Properties": {}}], /* none yet */ "Topics": []}],\n'
        '"Logging": {"Type": "File"}}}'
    )
    with pytest.raises(config.ConfigError, match="invalid queue name 'q//1'"):
        config.load(path)  # the // inside a string is not a comment
    path.write_text(path.read_text().replace("q//1", "q1"))
    assert [q.name for q in config.load(path).queues] == ["q1"]


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        (
            {"FilterType": "Sql", "SqlFilter": {"SqlExpression": "color = 'red' AND"}},
            "price-changes/catalog/r: ",
        ),
        (
            {"FilterType": "Sql", "SqlFilter": {"SqlExpression": "sys.Nonsense = 1"}},
            "Nonsense",
        ),
        (
            {
                "FilterType": "Sql",
                "SqlFilter": {"SqlExpression": "1=1"},
                "Action": {"SqlExpression": "SET sys.SequenceNumber = 1"},
            },
            "SequenceNumber",
        ),
        ({"FilterType": "Regex"}, "FilterType must be 'Correlation' or 'Sql'"),
        ({"FilterType": "Correlation", "CorrelationFilter": {"Colour": "red"}}, "Colour"),
    ],
)
def test_a_rule_service_bus_would_refuse_stops_the_load_with_its_reason(
    rule: dict[str, Any], message: str
) -> None:
    document = official_config_with_a_topic()
    subscription = document["UserConfig"]["Namespaces"][0]["Topics"][0]["Subscriptions"][0]
    subscription["Rules"] = [{"Name": "r", "Properties": rule}]
    with pytest.raises(config.ConfigError, match=re.escape(message)):
        config.load(document)


def test_forwarding_to_an_entity_that_does_not_exist_is_refused() -> None:
    document = official_config_with_a_topic()
    document["UserConfig"]["Namespaces"][0]["Queues"][0]["Properties"]["ForwardTo"] = "nowhere"
    with pytest.raises(config.ConfigError, match="ForwardTo names 'nowhere'"):
        config.load(document)


def test_microsofts_documented_config_loads() -> None:
    namespace = config.load(MICROSOFT_CONFIG)
    assert [q.name for q in namespace.queues] == ["queue.1"]
    (topic,) = namespace.topics
    assert [s.name for s in topic.subscriptions] == [f"subscription.{n}" for n in range(1, 5)]
    sql = topic.subscriptions[3].rules[0]
    assert sql.sql == "sys.MessageId = '123456' AND userProp1 = 'value1'"
    assert sql.action == "SET sys.To = 'Entity'"
