"""What the operators do with values.

Service Bus documents that operators follow C# operator binding (numeric promotion, implicit
conversions). Values here are Python's: None is SQL's NULL and also the unknown value a missing
property evaluates to; either one makes an operator's result unknown (None).

- Numbers: int is Int64 (results wrap as C# `long` does unchecked); int with float promotes to
  float. Integer `/` truncates toward zero and `%` takes the dividend's sign, as in C#; integer
  division or remainder by zero fails the evaluation (DivideByZeroException in C#). Float
  division by zero gives infinity or NaN, as C# doubles do.
- Strings: `=` and `<>` (ordinal, case-sensitive); `+` concatenates two strings. C# strings have
  no `<`, so ordering two strings is unknown.
- bool, UUID and bytes: `=` and `<>` only.
- datetime and timedelta: all comparisons; datetime - datetime gives a timedelta; datetime and
  timedelta add and subtract. A naive datetime is taken as UTC.
- Any other pairing (a string with a number, a bool with a number, ...) is unknown, so it never
  matches, negated or not. Service Bus does not document what it does there; a property sent as
  the string "10" is reported not to match `Quantity > 10`, and a correlation filter value 2
  not to match the string "2", which this follows.
"""

from __future__ import annotations

import functools
import math
import operator
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from .errors import SqlEvaluationError

Binary = Callable[[Any, Any], Any]
Comparison = Callable[[Any, Any], bool | None]

NUMBER, STRING, BOOL, GUID, BINARY = "number", "str", "bool", "uuid", "bytes"
INSTANT, DURATION = "datetime", "timedelta"
_ORDERED = frozenset({NUMBER, INSTANT, DURATION})
_KINDS: dict[type, str] = {
    int: NUMBER,
    float: NUMBER,
    str: STRING,
    bool: BOOL,
    uuid.UUID: GUID,
    bytes: BINARY,
    datetime: INSTANT,
    timedelta: DURATION,
}
_INT64_MIN, _INT64_SPAN = -(2**63), 2**64


def kind(value: Any) -> str | None:
    """The SQL type of a value, or None for one no operator takes (a list, a map, ...)."""
    found = _KINDS.get(type(value))
    if found is not None:
        return found
    # subclasses, such as the codec's wire-typed ints and symbols; bool before int
    for cls in (bool, int, float, str, bytes, uuid.UUID, datetime, timedelta):
        if isinstance(value, cls):
            return _KINDS[cls]
    return None


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def _int64(value: int) -> int:
    if _INT64_MIN <= value < -_INT64_MIN:
        return value
    return (value - _INT64_MIN) % _INT64_SPAN + _INT64_MIN


def comparison(op: str) -> Comparison:
    """The comparison `op` (=, <>, !=, <, <=, >, >=) in three-valued logic."""
    compare: Callable[[Any, Any], bool] = {
        "=": operator.eq,
        "<>": operator.ne,
        "!=": operator.ne,
        "<": operator.lt,
        "<=": operator.le,
        ">": operator.gt,
        ">=": operator.ge,
    }[op]
    ordering = op not in ("=", "<>", "!=")

    def evaluate(left: Any, right: Any) -> bool | None:
        if left is None or right is None:
            return None
        left_kind = kind(left)
        if left_kind is None or left_kind != kind(right):
            return None
        if ordering and left_kind not in _ORDERED:
            return None
        if left_kind == INSTANT:
            left, right = _utc(left), _utc(right)
        return compare(left, right)

    return evaluate


equals = comparison("=")


def _add(left: Any, right: Any) -> Any:
    kinds = (kind(left), kind(right))
    if kinds == (NUMBER, NUMBER):
        if isinstance(left, float) or isinstance(right, float):
            return float(left) + float(right)
        return _int64(left + right)
    if kinds == (STRING, STRING):
        return str(left) + str(right)
    if kinds == (DURATION, DURATION):
        return left + right
    if kinds == (INSTANT, DURATION):
        return _shift(_utc(left), right)
    if kinds == (DURATION, INSTANT):
        return _shift(_utc(right), left)
    return None


def _subtract(left: Any, right: Any) -> Any:
    kinds = (kind(left), kind(right))
    if kinds == (NUMBER, NUMBER):
        if isinstance(left, float) or isinstance(right, float):
            return float(left) - float(right)
        return _int64(left - right)
    if kinds == (DURATION, DURATION):
        return left - right
    if kinds == (INSTANT, INSTANT):
        return _utc(left) - _utc(right)
    if kinds == (INSTANT, DURATION):
        return _shift(_utc(left), -right)
    return None


def _shift(instant: datetime, by: timedelta) -> datetime:
    try:
        return instant + by
    except OverflowError:
        raise SqlEvaluationError(f"{instant.isoformat()} + {by} is out of range") from None


def _multiply(left: Any, right: Any) -> Any:
    if kind(left) != NUMBER or kind(right) != NUMBER:
        return None
    if isinstance(left, float) or isinstance(right, float):
        return float(left) * float(right)
    return _int64(left * right)


def _divide(left: Any, right: Any) -> Any:
    if kind(left) != NUMBER or kind(right) != NUMBER:
        return None
    if isinstance(left, float) or isinstance(right, float):
        left, right = float(left), float(right)
        if right == 0.0:
            if left == 0.0 or math.isnan(left):
                return math.nan
            return math.copysign(math.inf, left) * math.copysign(1.0, right)
        return left / right
    if right == 0:
        raise SqlEvaluationError(f"integer division by zero ({left} / 0)")
    quotient = abs(left) // abs(right)
    return _int64(quotient if (left < 0) == (right < 0) else -quotient)


def _remainder(left: Any, right: Any) -> Any:
    if kind(left) != NUMBER or kind(right) != NUMBER:
        return None
    if isinstance(left, float) or isinstance(right, float):
        if float(right) == 0.0:
            return math.nan
        return math.fmod(float(left), float(right))
    if right == 0:
        raise SqlEvaluationError(f"integer remainder by zero ({left} % 0)")
    magnitude = abs(left) % abs(right)
    return -magnitude if left < 0 else magnitude


def _null_propagating(operation: Binary) -> Binary:
    def evaluate(left: Any, right: Any) -> Any:
        if left is None or right is None:
            return None
        return operation(left, right)

    return evaluate


ARITHMETIC: dict[str, Binary] = {
    "+": _null_propagating(_add),
    "-": _null_propagating(_subtract),
    "*": _null_propagating(_multiply),
    "/": _null_propagating(_divide),
    "%": _null_propagating(_remainder),
}


def negate(value: Any) -> Any:
    value_kind = kind(value)
    if value_kind == NUMBER:
        return -value if isinstance(value, float) else _int64(-value)
    if value_kind == DURATION:
        return -value
    return None


def plus(value: Any) -> Any:
    return value if kind(value) in (NUMBER, DURATION) else None


@functools.lru_cache(maxsize=256)
def like_pattern(pattern: str, escape: str | None) -> re.Pattern[str]:
    """The regular expression a LIKE pattern stands for: `%` any run of characters, `_` any
    one, the escape character makes the next character literal. Case-sensitive, whole string.

    Raises ValueError with the reason when the escape is not one character or ends the pattern.
    """
    if escape is not None and len(escape) != 1:
        raise ValueError(f"the LIKE escape must be one character, not {escape!r}")
    parts = []
    position = 0
    while position < len(pattern):
        char = pattern[position]
        if char == escape:
            if position + 1 == len(pattern):
                raise ValueError(f"the LIKE pattern {pattern!r} ends with its escape character")
            parts.append(re.escape(pattern[position + 1]))
            position += 2
            continue
        parts.append(".*" if char == "%" else "." if char == "_" else re.escape(char))
        position += 1
    return re.compile("".join(parts), re.DOTALL)
