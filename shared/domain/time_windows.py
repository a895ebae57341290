"""Times a caller gives (a window of failures, of audit entries), read as the app writes times:
ISO 8601 with an offset, turned to UTC, so that a window compares with the stored times as
strings (Table Storage filters compare strings) as it would as times."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from .errors import InvalidInput

TIME_EXAMPLE = "2026-11-23T09:00:00Z"


def utc_time(field: str, text: str, *, assume_utc: bool = False) -> str:
    """``text`` (ISO 8601 with ``Z`` or an offset) as the app writes a time; raises
    ``InvalidInput`` naming ``field`` otherwise. ``assume_utc``: a time without an offset is
    UTC (the console's fields say so)."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidInput(field, f"must be an ISO 8601 time such as {TIME_EXAMPLE}") from None
    if moment.tzinfo is None and assume_utc:
        moment = moment.replace(tzinfo=UTC)
    if moment.tzinfo is None:
        raise InvalidInput(field, f"must say its offset from UTC (Z or +01:00): {TIME_EXAMPLE}")
    return moment.astimezone(UTC).isoformat()


def time_window(
    start: str | None,
    end: str | None,
    *,
    names: tuple[str, str] = ("failed_from", "failed_to"),
    assume_utc: bool = False,
) -> tuple[str | None, str | None]:
    """Both ends read with ``utc_time`` (either may be open); ``InvalidInput`` naming the end
    when it is not after the start."""
    low = utc_time(names[0], start, assume_utc=assume_utc) if start else None
    high = utc_time(names[1], end, assume_utc=assume_utc) if end else None
    if low and high and not low < high:
        raise InvalidInput(names[1], f"must be after {names[0]} ({low}), got {high}")
    return low, high


def within(start: str | None, end: str | None) -> Callable[[str | None], bool]:
    """Whether a stored time is in ``[start, end)``; an unknown time is in no closed window."""

    def test(at: str | None) -> bool:
        if start is None and end is None:
            return True
        return at is not None and (start is None or at >= start) and (end is None or at < end)

    return test
