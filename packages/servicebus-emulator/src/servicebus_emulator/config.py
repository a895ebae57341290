"""Entities from the official emulator's config.json, so one file drives both emulators.

{"UserConfig": {"Namespaces": [{"Name": "sbemulatorns",
  "Queues": [{"Name": "orders", "Properties": {"RequiresSession": true, "LockDuration": "PT1M",
              "MaxDeliveryCount": 10, "DefaultMessageTimeToLive": "PT1H", ...}}],
  "Topics": [{"Name": "prices", "Properties": {...},
              "Subscriptions": [{"Name": "eur", "Properties": {...},
                  "Rules": [{"Name": "only-eur", "Properties": {"FilterType": "Correlation",
                             "CorrelationFilter": {"Properties": {"currency": "EUR"}}}}]}]}]}],
 "Logging": {"Type": "File"}}}

Microsoft's documentation ships this file with ``//`` comments in it, which are allowed here too.
Entity properties use the names the administration API uses, so the same parsers serve both.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .rules import (
    CORRELATION,
    CORRELATION_FIELDS,
    DEFAULT,
    FALSE,
    SQL,
    TRUE,
    RuleConfig,
    compile_rule,
)
from .sql_filter import SqlFilterError

_DURATION = re.compile(
    r"^P(?:(?P<days>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<hours>\d+(?:\.\d+)?)H)?(?:(?P<minutes>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$"
)
_UNIT_MS = {"days": 86_400_000, "hours": 3_600_000, "minutes": 60_000, "seconds": 1000}
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-]{0,259}")
RULE_NAME = re.compile(r"[A-Za-z0-9$][A-Za-z0-9._\-$]{0,49}")


class ConfigError(ValueError):
    pass


def duration_ms(text: str, setting: str) -> int:
    """An ISO 8601 duration (``PT1M``, ``P14D``, ``PT0.5S``) in milliseconds."""
    match = _DURATION.match(text.strip()) if isinstance(text, str) else None
    if match is None or text.strip() in ("P", "PT"):
        raise ConfigError(f"{setting}: {text!r} is not an ISO 8601 duration such as 'PT1M'")
    return int(sum(float(v) * _UNIT_MS[k] for k, v in match.groupdict().items() if v))


@dataclass(frozen=True)
class QueueConfig:
    """A queue's settings; a subscription (a queue its topic feeds) and a topic use them too."""

    name: str
    requires_session: bool = False
    max_delivery_count: int = 10
    lock_duration_ms: int = 60_000
    default_ttl_ms: int | None = None
    dead_lettering_on_expiration: bool = False
    requires_duplicate_detection: bool = False
    duplicate_detection_window_ms: int = 600_000
    forward_dead_lettered_to: str = ""
    forward_to: str = ""
    dead_lettering_on_filter_evaluation_exceptions: bool = True


@dataclass(frozen=True)
class SubscriptionConfig:
    settings: QueueConfig
    rules: tuple[RuleConfig, ...] = (DEFAULT,)

    @property
    def name(self) -> str:
        return self.settings.name


@dataclass(frozen=True)
class TopicConfig:
    settings: QueueConfig
    subscriptions: tuple[SubscriptionConfig, ...] = ()

    @property
    def name(self) -> str:
        return self.settings.name


@dataclass(frozen=True)
class NamespaceConfig:
    queues: tuple[QueueConfig, ...] = ()
    topics: tuple[TopicConfig, ...] = field(default=())


def load(source: str | Path | dict[str, Any]) -> NamespaceConfig:
    if isinstance(source, dict):
        document = source
    else:
        try:
            document = json.loads(without_comments(Path(source).read_text()))
        except (OSError, json.JSONDecodeError) as error:
            raise ConfigError(f"cannot read the emulator config {source}: {error}") from None
    try:
        namespaces = document["UserConfig"]["Namespaces"]
    except (KeyError, TypeError):
        raise ConfigError(
            "the config must look like the official emulator's: "
            '{"UserConfig": {"Namespaces": [{"Name": ..., "Queues": [...]}]}}'
        ) from None
    queues: list[QueueConfig] = []
    topics: list[TopicConfig] = []
    for namespace in namespaces:
        queues += [queue_config(_name(raw, "queue"), raw.get("Properties") or {}) for raw in
                   namespace.get("Queues") or []]  # fmt: skip
        topics += [_topic(raw) for raw in namespace.get("Topics") or []]
    result = NamespaceConfig(tuple(queues), tuple(topics))
    check(result)
    return result


def check(namespace: NamespaceConfig) -> None:
    """Names unique across queues and topics; forwarding targets that exist."""
    names = [q.name.lower() for q in namespace.queues] + [t.name.lower() for t in namespace.topics]
    duplicates = {name for name in names if names.count(name) > 1}
    if duplicates:
        raise ConfigError(f"queue and topic names must be unique: {sorted(duplicates)}")
    settings = [*namespace.queues]
    for topic in namespace.topics:
        settings += [s.settings for s in topic.subscriptions]
    for entity in settings:
        for setting, target in (
            ("ForwardTo", entity.forward_to),
            ("ForwardDeadLetteredMessagesTo", entity.forward_dead_lettered_to),
        ):
            if target and target.lower() not in names:
                raise ConfigError(
                    f"{entity.name}: {setting} names '{target}', which is neither a queue nor "
                    "a topic of this config"
                )


def without_comments(text: str) -> str:
    """JSON with ``//`` line comments and ``/* */`` block comments, as Microsoft ships it."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == '"':
            end = i + 1
            while end < n and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            out.append(text[i : end + 1])
            i = end + 1
        elif text.startswith("//", i):
            i = text.find("\n", i) if "\n" in text[i:] else n
        elif text.startswith("/*", i):
            close = text.find("*/", i + 2)
            i = n if close < 0 else close + 2
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _name(raw: Any, kind: str) -> str:
    name = raw.get("Name") if isinstance(raw, dict) else None
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ConfigError(
            f"invalid {kind} name {name!r}: letters, digits, '.', '-' and '_', "
            "starting with a letter or digit, at most 260 characters"
        )
    return name


def queue_config(name: str, props: dict[str, Any], *, topic: bool = False) -> QueueConfig:
    """Settings from entity properties (config.json's, or an administration request's)."""

    def flag(key: str, default: bool) -> bool:
        value = props.get(key, default)
        if not isinstance(value, bool):
            raise ConfigError(f"{name}: {key} must be true or false, not {value!r}")
        return value

    def duration(key: str, default: str | None) -> int | None:
        value = props.get(key) or default
        return duration_ms(value, f"{name}.{key}") if value else None

    max_delivery = props.get("MaxDeliveryCount", 10)
    if not isinstance(max_delivery, int) or isinstance(max_delivery, bool) or max_delivery < 1:
        raise ConfigError(f"{name}: MaxDeliveryCount must be a positive integer")
    forward = {key: props.get(key) or "" for key in ("ForwardTo", "ForwardDeadLetteredMessagesTo")}
    for key, value in forward.items():
        if not isinstance(value, str):
            raise ConfigError(f"{name}: {key} must be an entity name, not {value!r}")
    return QueueConfig(
        name=name,
        requires_session=flag("RequiresSession", False),
        max_delivery_count=max_delivery,
        lock_duration_ms=duration("LockDuration", "PT1M") or 60_000,
        default_ttl_ms=duration("DefaultMessageTimeToLive", None),
        dead_lettering_on_expiration=flag("DeadLetteringOnMessageExpiration", False),
        requires_duplicate_detection=flag("RequiresDuplicateDetection", False),
        duplicate_detection_window_ms=duration("DuplicateDetectionHistoryTimeWindow", "PT10M")
        or 600_000,
        forward_dead_lettered_to=forward["ForwardDeadLetteredMessagesTo"],
        forward_to=forward["ForwardTo"],
        dead_lettering_on_filter_evaluation_exceptions=flag(
            "DeadLetteringOnFilterEvaluationExceptions", True
        ),
    )


def _topic(raw: dict[str, Any]) -> TopicConfig:
    name = _name(raw, "topic")
    subscriptions = []
    for sub in raw.get("Subscriptions") or []:
        sub_name = _name(sub, f"subscription of topic {name}")
        settings = queue_config(sub_name, sub.get("Properties") or {})
        rules = tuple(rule_config(r, f"{name}/{sub_name}") for r in sub.get("Rules") or [])
        subscriptions.append(SubscriptionConfig(settings, rules or (DEFAULT,)))
    names = [s.name.lower() for s in subscriptions]
    if len(set(names)) < len(names):
        raise ConfigError(f"topic {name}: subscription names must be unique")
    return TopicConfig(queue_config(name, raw.get("Properties") or {}), tuple(subscriptions))


def rule_config(raw: dict[str, Any], where: str) -> RuleConfig:
    """A rule of config.json: {"Name", "Properties": {"FilterType": "Correlation" | "Sql",
    "CorrelationFilter": {...} | "SqlFilter": {"SqlExpression"}, "Action": {"SqlExpression"}}},
    compiled here so that a rule Service Bus would refuse stops the start with its reason."""
    name = raw.get("Name") if isinstance(raw, dict) else None
    if not isinstance(name, str) or not RULE_NAME.fullmatch(name):
        raise ConfigError(f"{where}: invalid rule name {name!r}")
    props = raw.get("Properties") or {}
    kind = props.get("FilterType")
    action = (props.get("Action") or {}).get("SqlExpression") or ""
    if kind == "Sql":
        sql = (props.get("SqlFilter") or {}).get("SqlExpression")
        if not isinstance(sql, str) or not sql.strip():
            raise ConfigError(f"{where}/{name}: a Sql rule needs SqlFilter.SqlExpression")
        config = RuleConfig(name, SQL, sql=sql, action=action)
    elif kind == "Correlation":
        fields = dict(props.get("CorrelationFilter") or {})
        properties = fields.pop("Properties", None) or {}
        unknown = sorted(set(fields) - set(CORRELATION_FIELDS))
        if unknown or not isinstance(properties, dict) or not (fields or properties):
            raise ConfigError(
                f"{where}/{name}: a CorrelationFilter takes {sorted(CORRELATION_FIELDS)} and "
                f"Properties (at least one of them)" + (f"; unknown: {unknown}" if unknown else "")
            )
        config = RuleConfig(name, CORRELATION, correlation=fields, properties=properties,
                            action=action)  # fmt: skip
    elif kind in ("True", "False"):
        config = RuleConfig(name, TRUE if kind == "True" else FALSE, action=action)
    else:
        raise ConfigError(
            f"{where}/{name}: FilterType must be 'Correlation' or 'Sql', not {kind!r}"
        )
    validate_rule(config, f"{where}/{name}")
    return config


def validate_rule(config: RuleConfig, where: str) -> None:
    try:
        compile_rule(config)
    except SqlFilterError as error:
        raise ConfigError(f"{where}: {error}") from None
