"""What each SET and REMOVE statement of a rule action does to the message."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from . import values
from .errors import SqlEvaluationError
from .properties import WRITABLE_SYSTEM_PROPERTIES, RuleMessage, find_key

Evaluator = Callable[[RuleMessage], Any]
Statement = Callable[[RuleMessage], None]


def set_user(name: str, evaluate: Evaluator) -> Statement:
    """SET on a user property: creates it, or replaces the one `name` finds (keeping its key)."""

    def run(message: RuleMessage) -> None:
        value = evaluate(message)
        properties = message.application_properties
        key = find_key(properties, name)
        if key is None:
            properties[name] = value
            return
        # SET converts implicitly where C# would: a number stored into a double stays a double
        if isinstance(properties[key], float) and values.kind(value) == values.NUMBER:
            value = float(value)
        properties[key] = value

    return run


def remove_user(name: str) -> Statement:
    """REMOVE on a user property: deletes every key that is `name` but for case."""
    folded = name.casefold()

    def run(message: RuleMessage) -> None:
        properties = message.application_properties
        for key in [k for k in properties if isinstance(k, str) and k.casefold() == folded]:
            del properties[key]

    return run


def set_system(name: str, evaluate: Evaluator) -> Statement:
    def run(message: RuleMessage) -> None:
        message.set_system_property(name, system_value(name, evaluate(message)))

    return run


def clear_system(name: str) -> Statement:
    return lambda message: message.set_system_property(name, None)


def system_value(name: str, value: Any) -> Any:
    """`value` as the writable system property `name` stores it (None clears it).

    Raises SqlEvaluationError when it is of a type the property cannot take.
    """
    expected = WRITABLE_SYSTEM_PROPERTIES[name]
    if value is None:
        return None
    if expected == "str" and isinstance(value, str | uuid.UUID):
        return str(value)
    if expected == "timedelta" and isinstance(value, timedelta):
        return value
    if expected == "datetime" and isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    wanted = "string" if expected == "str" else expected
    raise SqlEvaluationError(f"sys.{name} takes a {wanted}, not {type(value).__name__} {value!r}")
