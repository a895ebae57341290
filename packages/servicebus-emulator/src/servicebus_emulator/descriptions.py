"""Entity descriptions as the management API carries them: a queue's, topic's, subscription's
and rule's XML rendered from the emulator's state (settings, counts, times), and a request's
description read into the settings config.json would give (config.py parses both alike).

Properties the emulator keeps but does not act on (MaxSizeInMegabytes, Status, UserMetadata,
AutoDeleteOnIdle, ...) are echoed as the client last set them.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any

from . import atom
from .atom import AtomError, children, duration, instant, key_values, local_type, text
from .config import QueueConfig
from .entities import QUEUE, SUBSCRIPTION, TOPIC, Entity
from .message import ACTIVE, SCHEDULED
from .rules import CORRELATION, CORRELATION_FIELDS, FALSE, SQL, TRUE, Rule, RuleConfig

_FLAGS = {
    "RequiresSession", "RequiresDuplicateDetection", "DeadLetteringOnMessageExpiration",
    "DeadLetteringOnFilterEvaluationExceptions", "EnableBatchedOperations", "EnablePartitioning",
    "SupportOrdering", "EnableExpress", "FilteringMessagesBeforePublishing",
    "IsAnonymousAccessible", "EnableSubscriptionPartitioning",
}  # fmt: skip
_NUMBERS = {"MaxDeliveryCount", "MaxSizeInMegabytes", "MaxMessageSizeInKilobytes"}
_SETTINGS = {
    "RequiresSession", "RequiresDuplicateDetection", "DeadLetteringOnMessageExpiration",
    "DeadLetteringOnFilterEvaluationExceptions", "MaxDeliveryCount", "LockDuration",
    "DefaultMessageTimeToLive", "DuplicateDetectionHistoryTimeWindow", "ForwardTo",
    "ForwardDeadLetteredMessagesTo",
}  # fmt: skip
# Runtime facts the server reports; ignored when a client sends them back.
_RUNTIME = {
    "SizeInBytes", "MessageCount", "CountDetails", "CreatedAt", "UpdatedAt", "AccessedAt",
    "AuthorizationRules", "EntityAvailabilityStatus", "SubscriptionCount",
    "DefaultRuleDescription",
}  # fmt: skip
_DEFAULTS = {
    "MaxSizeInMegabytes": "1024", "EnableBatchedOperations": "true", "Status": "Active",
    "AutoDeleteOnIdle": atom.FOREVER, "EnablePartitioning": "false", "SupportOrdering": "true",
    "EnableExpress": "false", "IsAnonymousAccessible": "false",
    "FilteringMessagesBeforePublishing": "false", "EnableSubscriptionPartitioning": "false",
    "MaxMessageSizeInKilobytes": "1024",
}  # fmt: skip
_FOREVER_MS = 10**14  # anything this long is TimeSpan.MaxValue: no limit


@dataclass
class Description:
    """What a request's description says: settings as config.json would give them, and the
    properties only echoed back (element name -> text)."""

    props: dict[str, Any]
    extras: dict[str, str] = field(default_factory=dict)
    default_rule: RuleConfig | None = None  # a new subscription's DefaultRuleDescription


def read_entity(body: bytes, kind: str) -> Description:
    element = atom.description(body, _ELEMENT[kind])
    props: dict[str, Any] = {}
    extras: dict[str, str] = {}
    default_rule = None
    for name, child in children(element).items():
        value = (child.text or "").strip()
        if name == "DefaultRuleDescription" and kind == SUBSCRIPTION:
            default_rule = _rule(child)
        elif name in _RUNTIME:
            continue
        elif name in ("ForwardTo", "ForwardDeadLetteredMessagesTo"):
            props[name] = atom.entity_name(value)
        elif name in ("DefaultMessageTimeToLive", "AutoDeleteOnIdle") and _forever(value):
            continue
        elif name in _FLAGS:
            if value.lower() not in ("true", "false"):
                raise AtomError(f"{name} must be true or false, not {value!r}")
            _keep(name, value.lower() == "true", props, extras)
        elif name in _NUMBERS:
            try:
                _keep(name, int(value), props, extras)
            except ValueError:
                raise AtomError(f"{name} must be an integer, not {value!r}") from None
        else:
            _keep(name, value, props, extras)
    return Description(props, extras, default_rule)


def _keep(name: str, value: Any, props: dict[str, Any], extras: dict[str, str]) -> None:
    if name in _SETTINGS:
        props[name] = value
    else:
        extras[name] = text(value) if isinstance(value, bool) else str(value)


def _forever(value: str) -> bool:
    try:
        return atom.duration_ms(value, "a duration") >= _FOREVER_MS
    except ValueError:
        return False


def read_rule(body: bytes) -> RuleConfig:
    return _rule(atom.description(body, "RuleDescription"))


def _rule(element: ET.Element) -> RuleConfig:
    parts = children(element)
    name = (parts["Name"].text or "").strip() if "Name" in parts else ""
    filter_element = parts.get("Filter")
    action_element = parts.get("Action")
    filter_type = local_type(filter_element) if filter_element is not None else TRUE
    fields = children(filter_element) if filter_element is not None else {}
    action = ""
    action_parameters: dict[str, Any] = {}
    if action_element is not None and local_type(action_element) == "SqlRuleAction":
        action_fields = children(action_element)
        action = (
            (action_fields["SqlExpression"].text or "") if "SqlExpression" in action_fields else ""
        )
        action_parameters = _key_values(action_fields.get("Parameters"))
    if filter_type in (TRUE, FALSE):
        return RuleConfig(name, filter_type, action=action, action_parameters=action_parameters)
    if filter_type == "SqlFilter":
        sql = fields["SqlExpression"].text if "SqlExpression" in fields else None
        if not sql:
            raise AtomError("a SqlFilter needs a SqlExpression")
        return RuleConfig(
            name, SQL, sql=sql, parameters=_key_values(fields.get("Parameters")),
            action=action, action_parameters=action_parameters,
        )  # fmt: skip
    if filter_type == "CorrelationFilter":
        correlation = {
            key: child.text or ""
            for key, child in fields.items()
            if key in CORRELATION_FIELDS and child.text
        }
        return RuleConfig(
            name, CORRELATION, correlation=correlation,
            properties=_key_values(fields.get("Properties")),
            action=action, action_parameters=action_parameters,
        )  # fmt: skip
    raise AtomError(
        f"a rule's Filter must be a SqlFilter, CorrelationFilter, TrueFilter or FalseFilter, "
        f"not {filter_type or 'untyped'}"
    )


def _key_values(element: ET.Element | None) -> dict[str, Any]:
    if element is None:
        return {}
    found = {}
    for item in element:
        parts = children(item)
        if "Key" in parts and "Value" in parts:
            found[parts["Key"].text or ""] = atom.typed_value(parts["Value"])
    return found


# ---------------------------------------------------------------------------------- render

_ELEMENT = {
    QUEUE: "QueueDescription",
    TOPIC: "TopicDescription",
    SUBSCRIPTION: "SubscriptionDescription",
}
_ORDER = {
    QUEUE: (
        "LockDuration", "MaxSizeInMegabytes", "RequiresDuplicateDetection", "RequiresSession",
        "DefaultMessageTimeToLive", "DeadLetteringOnMessageExpiration",
        "DuplicateDetectionHistoryTimeWindow", "MaxDeliveryCount", "EnableBatchedOperations",
        "SizeInBytes", "MessageCount", "IsAnonymousAccessible", "AuthorizationRules", "Status",
        "ForwardTo", "UserMetadata", "CreatedAt", "UpdatedAt", "AccessedAt", "SupportOrdering",
        "CountDetails", "AutoDeleteOnIdle", "EnablePartitioning", "EntityAvailabilityStatus",
        "ForwardDeadLetteredMessagesTo", "EnableExpress", "MaxMessageSizeInKilobytes",
    ),
    TOPIC: (
        "DefaultMessageTimeToLive", "MaxSizeInMegabytes", "RequiresDuplicateDetection",
        "DuplicateDetectionHistoryTimeWindow", "EnableBatchedOperations", "SizeInBytes",
        "FilteringMessagesBeforePublishing", "IsAnonymousAccessible", "AuthorizationRules",
        "Status", "UserMetadata", "CreatedAt", "UpdatedAt", "AccessedAt", "SupportOrdering",
        "CountDetails", "SubscriptionCount", "AutoDeleteOnIdle", "EnablePartitioning",
        "EntityAvailabilityStatus", "EnableSubscriptionPartitioning", "EnableExpress",
        "MaxMessageSizeInKilobytes",
    ),
    SUBSCRIPTION: (
        "LockDuration", "RequiresSession", "DefaultMessageTimeToLive",
        "DeadLetteringOnMessageExpiration", "DeadLetteringOnFilterEvaluationExceptions",
        "MessageCount", "MaxDeliveryCount", "EnableBatchedOperations", "Status", "ForwardTo",
        "UserMetadata", "CreatedAt", "UpdatedAt", "AccessedAt", "CountDetails",
        "AutoDeleteOnIdle", "ForwardDeadLetteredMessagesTo", "EntityAvailabilityStatus",
    ),
}  # fmt: skip


def render_entity(entity: Entity) -> str:
    """The <QueueDescription> (or Topic…, Subscription…) of an entity, counts included."""
    values = {**_DEFAULTS, **entity.extras, **_settings(entity.config), **_runtime(entity)}
    body = "".join(
        _element(name, values[name])
        for name in _ORDER[entity.kind]
        if name in values and values[name] is not None
    )
    return (
        f'<{_ELEMENT[entity.kind]} xmlns="{atom.CONNECT}" xmlns:i="{atom.INSTANCE}">{body}'
        f"</{_ELEMENT[entity.kind]}>"
    )


def _element(name: str, value: str | None) -> str:
    if value is None:
        return ""
    if value.startswith(f"<{name}"):  # rendered whole (it declares a namespace)
        return value
    return f"<{name}>{value}</{name}>" if value else f"<{name}/>"


def _settings(config: QueueConfig) -> dict[str, str | None]:
    return {
        "LockDuration": duration(config.lock_duration_ms),
        "RequiresSession": text(config.requires_session),
        "RequiresDuplicateDetection": text(config.requires_duplicate_detection),
        "DefaultMessageTimeToLive": duration(config.default_ttl_ms),
        "DeadLetteringOnMessageExpiration": text(config.dead_lettering_on_expiration),
        "DeadLetteringOnFilterEvaluationExceptions": text(
            config.dead_lettering_on_filter_evaluation_exceptions
        ),
        "DuplicateDetectionHistoryTimeWindow": duration(config.duplicate_detection_window_ms),
        "MaxDeliveryCount": str(config.max_delivery_count),
        "ForwardTo": text(config.forward_to) or None,
        "ForwardDeadLetteredMessagesTo": text(config.forward_dead_lettered_to) or None,
    }


def _runtime(entity: Entity) -> dict[str, str]:
    messages = list(entity.messages.values())
    dead = list(entity.dead_letter.messages.values()) if entity.dead_letter else []
    states = [m.state for m in messages]
    count = lambda state: states.count(state)  # noqa: E731
    details = "".join(
        f"<d2p1:{name}>{value}</d2p1:{name}>"
        for name, value in (
            ("ActiveMessageCount", count(ACTIVE)),
            ("DeadLetterMessageCount", len(dead)),
            ("ScheduledMessageCount", count(SCHEDULED)),
            ("TransferMessageCount", 0),
            ("TransferDeadLetterMessageCount", 0),
        )
    )
    runtime = {
        "SizeInBytes": str(sum(m.size for m in messages + dead)),
        "MessageCount": str(len(messages) + len(dead)),
        "AuthorizationRules": "",
        "CreatedAt": instant(entity.created_at),
        "UpdatedAt": instant(entity.updated_at),
        "AccessedAt": instant(entity.updated_at),
        "CountDetails": f'<CountDetails xmlns:d2p1="{atom.COUNTS}">{details}</CountDetails>',
        "EntityAvailabilityStatus": "Available",
    }
    if entity.kind == TOPIC:
        runtime["SubscriptionCount"] = str(len(entity.subscriptions))
    return runtime


def render_rule(rule: Rule) -> str:
    config = rule.config
    if config.filter_type == CORRELATION:
        fields = "".join(
            f"<{name}>{text(config.correlation[name])}</{name}>"
            for name in CORRELATION_FIELDS
            if name in config.correlation
        )
        fields += f"<Properties>{key_values(config.properties)}</Properties>"
    else:
        expression = {TRUE: "1=1", FALSE: "1=0"}.get(config.filter_type, config.sql)
        fields = (
            f"<SqlExpression>{text(expression)}</SqlExpression>"
            "<CompatibilityLevel>20</CompatibilityLevel>"
        )
        if config.parameters:
            fields += f"<Parameters>{key_values(config.parameters)}</Parameters>"
    if config.action:
        action = (
            f'<Action i:type="SqlRuleAction"><SqlExpression>{text(config.action)}</SqlExpression>'
            f"<CompatibilityLevel>20</CompatibilityLevel>"
            + (f"<Parameters>{key_values(config.action_parameters)}</Parameters>"
               if config.action_parameters else "")
            + "</Action>"
        )  # fmt: skip
    else:
        action = '<Action i:type="EmptyRuleAction"/>'
    return (
        f'<RuleDescription xmlns="{atom.CONNECT}" xmlns:i="{atom.INSTANCE}">'
        f'<Filter i:type="{config.filter_type}">{fields}</Filter>{action}'
        f"<CreatedAt>{instant(rule.created_at)}</CreatedAt><Name>{text(config.name)}</Name>"
        "</RuleDescription>"
    )
