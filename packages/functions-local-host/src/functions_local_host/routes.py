"""HTTP route templates as the Functions host (ASP.NET Core routing) reads them:
literal segments (case-insensitive), ``{name}``, optional ``{name?}`` at the end, a catch-all
``{*name}``, and constraints ``{name:int}``, ``long``, ``alpha``, ``bool``, ``guid``,
``double``, ``float``, ``decimal``, ``datetime``, ``minlength(n)``, ``maxlength(n)``,
``length(n)``, ``min(n)``, ``max(n)``, ``range(a,b)`` and ``regex(...)``."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation

_PARAMETER = re.compile(r"^\{(\*?)([A-Za-z_][A-Za-z0-9_]*)((?::[^:?}]+(?:\([^)]*\))?)*)(\?)?\}$")
_CONSTRAINT = re.compile(r":([a-z]+)(?:\(([^)]*)\))?")


class RouteTemplateError(ValueError):
    pass


def _is_number(kind: Callable[[str], object]) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        try:
            kind(value)
        except (ValueError, InvalidOperation):
            return False
        return True

    return check


def _is_datetime(value: str) -> bool:
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


def _constraint(name: str, argument: str | None) -> Callable[[str], bool]:
    simple: dict[str, Callable[[str], bool]] = {
        "int": lambda v: re.fullmatch(r"-?\d+", v) is not None and -(2**31) <= int(v) < 2**31,
        "long": lambda v: re.fullmatch(r"-?\d+", v) is not None and -(2**63) <= int(v) < 2**63,
        "alpha": lambda v: re.fullmatch(r"[A-Za-z]+", v) is not None,
        "bool": lambda v: v.lower() in ("true", "false"),
        "guid": _is_number(uuid.UUID),
        "double": _is_number(float),
        "float": _is_number(float),
        "decimal": _is_number(Decimal),
        "datetime": _is_datetime,
    }
    if name in simple and argument is None:
        return simple[name]
    if argument is None:
        raise RouteTemplateError(f"unknown route constraint :{name}")
    args = [a.strip() for a in argument.split(",")]
    if name == "minlength":
        return lambda v: len(v) >= int(args[0])
    if name == "maxlength":
        return lambda v: len(v) <= int(args[0])
    if name == "length":
        return lambda v: (
            len(v) == int(args[0]) if len(args) == 1 else int(args[0]) <= len(v) <= int(args[1])
        )
    if name in ("min", "max", "range"):
        low = int(args[0]) if name in ("min", "range") else None
        high = int(args[-1]) if name in ("max", "range") else None
        return lambda v: (
            re.fullmatch(r"-?\d+", v) is not None
            and (low is None or int(v) >= low)
            and (high is None or int(v) <= high)
        )
    if name == "regex":
        pattern = re.compile(argument)
        return lambda v: pattern.search(v) is not None
    raise RouteTemplateError(f"unknown route constraint :{name}({argument})")


@dataclass(frozen=True)
class _Segment:
    literal: str | None = None
    name: str | None = None
    optional: bool = False
    catch_all: bool = False
    checks: tuple[Callable[[str], bool], ...] = ()


class RouteTemplate:
    def __init__(self, template: str) -> None:
        self.template = template.strip("/")
        self._segments: list[_Segment] = []
        for part in self.template.split("/") if self.template else []:
            match = _PARAMETER.match(part)
            if match is None:
                if "{" in part or "}" in part:
                    raise RouteTemplateError(f"unsupported route segment {part!r} in {template!r}")
                self._segments.append(_Segment(literal=part.lower()))
                continue
            star, name, constraints, optional = match.groups()
            checks = tuple(
                _constraint(c.group(1), c.group(2)) for c in _CONSTRAINT.finditer(constraints)
            )
            self._segments.append(
                _Segment(name=name, optional=bool(optional), catch_all=bool(star), checks=checks)
            )

    @property
    def precedence(self) -> tuple[int, int, int]:
        """Sort key: literal segments first, then constrained parameters, catch-alls last."""
        literals = sum(1 for s in self._segments if s.literal is not None)
        constrained = sum(1 for s in self._segments if s.checks)
        catch_all = sum(1 for s in self._segments if s.catch_all)
        return (catch_all, -literals, -constrained)

    def match(self, path: str) -> dict[str, str] | None:
        """Route values for ``path`` (already without the route prefix), or None."""
        parts = [p for p in path.strip("/").split("/")] if path.strip("/") else []
        values: dict[str, str] = {}
        for index, segment in enumerate(self._segments):
            if segment.catch_all:
                rest = "/".join(parts[index:])
                if rest:
                    values[str(segment.name)] = rest
                return values
            if index >= len(parts):
                if all(s.optional or s.catch_all for s in self._segments[index:]):
                    return values
                return None
            part = parts[index]
            if segment.literal is not None:
                if part.lower() != segment.literal:
                    return None
                continue
            if not all(check(part) for check in segment.checks):
                return None
            values[str(segment.name)] = part
        return values if len(parts) == len(self._segments) else None
