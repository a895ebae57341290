"""Entities from the official emulator's config.json, so one file drives both emulators.

{"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": [
    {"Name": "orders", "Properties": {"RequiresSession": true, "MaxDeliveryCount": 10,
     "LockDuration": "PT1M", "DefaultMessageTimeToLive": "PT1H", ...}}],
  "Topics": []}], "Logging": {"Type": "File"}}}
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

_DURATION = re.compile(
    r"^P(?:(?P<days>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<hours>\d+(?:\.\d+)?)H)?(?:(?P<minutes>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$"
)
_UNIT_MS = {"days": 86_400_000, "hours": 3_600_000, "minutes": 60_000, "seconds": 1000}


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
    name: str
    requires_session: bool = False
    max_delivery_count: int = 10
    lock_duration_ms: int = 60_000
    default_ttl_ms: int | None = None
    dead_lettering_on_expiration: bool = False
    requires_duplicate_detection: bool = False
    duplicate_detection_window_ms: int = 600_000
    forward_dead_lettered_to: str = ""


def load(source: str | Path | dict[str, Any]) -> list[QueueConfig]:
    if isinstance(source, dict):
        document = source
    else:
        try:
            document = json.loads(Path(source).read_text())
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
    for namespace in namespaces:
        for raw in namespace.get("Queues") or []:
            queues.append(_queue(raw))
        for topic in namespace.get("Topics") or []:
            log.warning(
                "topic %r is in the config but topics are not supported yet; it is ignored",
                topic.get("Name"),
            )
    names = [queue.name.lower() for queue in queues]
    duplicates = {name for name in names if names.count(name) > 1}
    if duplicates:
        raise ConfigError(f"queue names must be unique: {sorted(duplicates)}")
    return queues


def _queue(raw: dict[str, Any]) -> QueueConfig:
    name = raw.get("Name")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._\-]{0,259}", name):
        raise ConfigError(f"invalid queue name {name!r}")
    props = raw.get("Properties") or {}

    def flag(key: str, default: bool) -> bool:
        value = props.get(key, default)
        if not isinstance(value, bool):
            raise ConfigError(f"queue {name}: {key} must be true or false, not {value!r}")
        return value

    max_delivery = props.get("MaxDeliveryCount", 10)
    if not isinstance(max_delivery, int) or max_delivery < 1:
        raise ConfigError(f"queue {name}: MaxDeliveryCount must be a positive integer")
    ttl = props.get("DefaultMessageTimeToLive")
    return QueueConfig(
        name=name,
        requires_session=flag("RequiresSession", False),
        max_delivery_count=max_delivery,
        lock_duration_ms=duration_ms(props.get("LockDuration", "PT1M"), f"{name}.LockDuration"),
        default_ttl_ms=duration_ms(ttl, f"{name}.DefaultMessageTimeToLive") if ttl else None,
        dead_lettering_on_expiration=flag("DeadLetteringOnMessageExpiration", False),
        requires_duplicate_detection=flag("RequiresDuplicateDetection", False),
        duplicate_detection_window_ms=duration_ms(
            props.get("DuplicateDetectionHistoryTimeWindow", "PT10M"),
            f"{name}.DuplicateDetectionHistoryTimeWindow",
        ),
        forward_dead_lettered_to=props.get("ForwardDeadLetteredMessagesTo") or "",
    )
