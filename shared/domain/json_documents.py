"""JSON request bodies, read strictly and with limits, so that nothing a caller sends can
crash the reader or slip past the checks of the document it holds.

A body must be UTF-8 JSON (RFC 8259) holding one object, nested at most ``MAX_DEPTH`` deep
(checked before parsing: the parser recurses), with no member name twice in an object, no
number literal longer than ``MAX_NUMBER_DIGITS`` characters (checked before conversion, so a
5,000-digit number costs nothing), no NaN or Infinity, and no string that is not a sequence of
Unicode scalar values (a lone surrogate such as ``\\ud800`` cannot be encoded, stored or
mailed). Each refusal is an ``InvalidInput`` naming where in the document the problem is.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

from .errors import InvalidInput

MAX_DEPTH = 16
MAX_NUMBER_DIGITS = 18

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")


class NotJson(InvalidInput):
    title = "The body is not JSON"


class NotAnObject(InvalidInput):
    title = "The body must be a JSON object"


class _Refused(Exception):
    def __init__(self, field: str, problem: str) -> None:
        self.field, self.problem = field, problem


class _BadNumber:
    """A number literal refused (too long to convert, or out of range), left in place so its
    path can be named."""

    def __init__(self, literal: str, problem: str) -> None:
        self.problem = problem


def parse_json_object(body: bytes, *, example: str) -> dict[str, Any]:
    """The JSON object in ``body``; raises ``InvalidInput`` (``NotJson``, ``NotAnObject``)
    naming what to fix. ``example`` shows the caller the shape to send."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise NotJson("body", f"is not UTF-8 (byte {error.start}): send UTF-8 JSON") from error
    depth = max(
        accumulate(1 if b in "[{" else -1 for b in _BRACKETS.findall(_STRING.sub("", text))),
        default=0,
    )
    if depth > MAX_DEPTH:
        raise InvalidInput("body", f"nests objects and arrays {depth} deep; at most {MAX_DEPTH}")
    try:
        document = json.loads(
            text,
            object_pairs_hook=_object,
            parse_int=_number(int),
            parse_float=_number(float),
            parse_constant=_constant,
        )
    except _Refused as refused:
        raise InvalidInput(refused.field, refused.problem) from None
    except json.JSONDecodeError as error:
        raise NotJson(
            "body",
            f"is not JSON ({error.msg} at character {error.pos}): send a JSON object such as "
            f"{example} (Content-Type: application/json)",
        ) from error
    if not isinstance(document, dict):
        raise NotAnObject("body", f"must be a JSON object such as {example}")
    _check(document, "")
    return document


def check_text(field: str, value: str) -> None:
    """Refuse a string that is not a sequence of Unicode scalar values."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidInput(
            field,
            f"holds a lone surrogate (U+{ord(value[error.start]):04X} at character "
            f"{error.start}), which is not a Unicode character: send valid UTF-8 text",
        ) from error


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document: dict[str, Any] = {}
    for name, value in pairs:
        if name in document:
            raise _Refused(name or "(empty name)", "appears twice in one object; send it once")
        document[name] = value
    return document


def _number(convert: type[int] | type[float]) -> Any:
    def parse(literal: str) -> Any:
        if len(literal) > MAX_NUMBER_DIGITS:
            return _BadNumber(
                literal,
                f"is a number of {len(literal)} characters; at most {MAX_NUMBER_DIGITS}",
            )
        value = convert(literal)
        if value in (float("inf"), float("-inf")):
            return _BadNumber(literal, "is a number out of range")
        return value

    return parse


def _constant(name: str) -> Any:
    raise _Refused("body", f"holds {name}, which is not a JSON number")


def _check(value: Any, path: str) -> None:
    """Walk the document: long numbers and lone surrogates, named by their path."""
    if isinstance(value, _BadNumber):
        raise InvalidInput(path or "body", value.problem)
    if isinstance(value, str):
        check_text(path or "body", value)
    elif isinstance(value, dict):
        for name, item in value.items():
            # A name that is not text is named by its escapes: it cannot be printed as it is.
            printable = name.encode("utf-8", "backslashreplace").decode("utf-8")
            where = f"{path}.{printable}" if path else printable
            check_text(where, name)
            _check(item, where)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check(item, f"{path}[{index}]")
