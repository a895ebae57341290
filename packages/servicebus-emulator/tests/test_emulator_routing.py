"""A topic's fan-out where a subscription cannot take a copy: the copy is dead-lettered in that
subscription with a reason, and the other subscriptions get theirs (nothing lost)."""

from __future__ import annotations

from typing import Any

from servicebus_emulator.broker import Broker
from servicebus_emulator.codec import Described, ULong, decode_all, encode
from servicebus_emulator.config import load
from servicebus_emulator.entities import Entity
from servicebus_emulator.message import parse


def namespace() -> Any:
    plain = {"RequiresSession": False}
    return load(
        {
            "UserConfig": {
                "Namespaces": [
                    {
                        "Name": "sbemulatorns",
                        "Queues": [],
                        "Topics": [
                            {
                                "Name": "t",
                                "Subscriptions": [
                                    {"Name": "all", "Properties": plain},
                                    {"Name": "sessions", "Properties": {"RequiresSession": True}},
                                    {
                                        "Name": "ratio",
                                        "Properties": plain,
                                        "Rules": [
                                            {
                                                "Name": "high",
                                                "Properties": {
                                                    "FilterType": "Sql",
                                                    "SqlFilter": {"SqlExpression": "a / b > 1"},
                                                },
                                            }
                                        ],
                                    },
                                ],
                            }
                        ],
                    }
                ],
                "Logging": {"Type": "File"},
            }
        }
    )


def send(broker: Broker, application_properties: dict[str, Any]) -> None:
    message = encode(Described(ULong(0x74), application_properties)) + encode(
        Described(ULong(0x75), b"body")
    )
    broker.send(broker.entity("t"), parse(message), len(message))


def reasons(entity: Entity) -> list[str]:
    assert entity.dead_letter is not None
    found = []
    for message in entity.dead_letter.messages.values():
        found.append(decode_all(message.application_properties).value["DeadLetterReason"])
    return found


def test_a_copy_without_a_session_id_is_dead_lettered_in_the_session_subscription() -> None:
    broker = Broker(namespace())
    send(broker, {"a": 1})
    assert len(broker.entity("t/Subscriptions/all").messages) == 1
    sessions = broker.entity("t/Subscriptions/sessions")
    assert sessions.messages == {}
    assert reasons(sessions) == ["SessionIdIsMissing"]


def test_a_rule_that_fails_on_a_message_dead_letters_it_in_its_subscription() -> None:
    broker = Broker(namespace())
    send(broker, {"a": 4, "b": 2})  # matches
    send(broker, {"a": 4, "b": 0})  # integer division by zero
    send(broker, {"a": 1, "b": 2})  # no match
    ratio = broker.entity("t/Subscriptions/ratio")
    assert len(ratio.messages) == 1
    assert reasons(ratio) == ["FilterEvaluationFailed"]
    assert len(broker.entity("t/Subscriptions/all").messages) == 3
