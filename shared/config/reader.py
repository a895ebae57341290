"""Reading app settings from the environment: each value checked, a bad one named with what
it must be (``ConfigurationError``)."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation

from ..domain.errors import PipelineError


class ConfigurationError(PipelineError):
    """A setting is missing or has a value the app cannot use."""


class SettingsReader:
    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ

    def optional(self, name: str) -> str | None:
        value = self._environ.get(name, "").strip()
        return value or None

    def required(self, name: str) -> str:
        value = self.optional(name)
        if value is None:
            raise ConfigurationError(f"The app setting {name} is required but not set.")
        return value

    def integer(self, name: str, default: int) -> int:
        value = self.optional(name)
        if value is None:
            return default
        try:
            return int(value)
        except ValueError as error:
            raise ConfigurationError(f"{name} must be a whole number, got {value!r}") from error

    def number(self, name: str, default: float) -> float:
        value = self.optional(name)
        if value is None:
            return default
        try:
            return float(value)
        except ValueError as error:
            raise ConfigurationError(f"{name} must be a number, got {value!r}") from error

    def seconds(self, name: str) -> float | None:
        """A duration in seconds, zero or more; None when not set."""
        if self.optional(name) is None:
            return None
        value = self.number(name, 0.0)
        if not 0 <= value < float("inf"):
            raise ConfigurationError(f"{name} must be a number of seconds, 0 or more")
        return value

    def decimal(self, name: str, default: str) -> Decimal:
        value = self.optional(name) or default
        try:
            result = Decimal(value)
        except InvalidOperation as error:
            raise ConfigurationError(f"{name} must be a decimal number, got {value!r}") from error
        if not result.is_finite() or result < 0:
            raise ConfigurationError(f"{name} must be zero or more, got {value!r}")
        return result

    def boolean(self, name: str, default: bool) -> bool:
        value = self.optional(name)
        if value is None:
            return default
        if value.lower() in ("1", "true", "yes"):
            return True
        if value.lower() in ("0", "false", "no"):
            return False
        raise ConfigurationError(f"{name} must be true or false, got {value!r}")

    def token_set(self, name: str) -> frozenset[str]:
        value = self.optional(name) or ""
        return frozenset(token.strip() for token in value.split(",") if token.strip())
