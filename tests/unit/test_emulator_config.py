"""The emulator's config loader: the official emulator's config.json, topics included."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from localdev.servicebus_emulator import config


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


def test_a_config_with_topics_loads_its_queues_and_warns_about_each_topic(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger=config.__name__):
        queues = config.load(official_config_with_a_topic())

    assert [q.name for q in queues] == ["orders", "orders-dead"]
    orders = queues[0]
    assert orders.requires_session is True
    assert orders.lock_duration_ms == 60_000
    assert orders.max_delivery_count == 5
    assert orders.forward_dead_lettered_to == "orders-dead"
    assert queues[1].requires_session is False

    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].name == config.__name__
    assert "price-changes" in warnings[0].getMessage()
    assert "not supported" in warnings[0].getMessage()


def test_a_config_without_topics_loads_without_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    document = official_config_with_a_topic()
    document["UserConfig"]["Namespaces"][0]["Topics"] = []
    with caplog.at_level(logging.WARNING, logger=config.__name__):
        queues = config.load(document)

    assert [q.name for q in queues] == ["orders", "orders-dead"]
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
