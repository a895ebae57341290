"""Idempotency-Key semantics (IETF httpapi draft "The Idempotency-Key HTTP Header Field").

A key names one request for good: the first request with it runs; a request with the same
key and the same fingerprint (the same body, the same target) gets the first one's result;
the same key with another fingerprint is refused (422); while the first request is still in
flight, a second is refused (409). A key whose request failed is released, so it can be
tried again. A request in flight for longer than the lease is taken to have died, and the next
request with its key takes it over: every operation behind a key is safe to run again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import Conflict, InvalidInput, Unprocessable

MAX_KEY_LENGTH = 255
HEADER = "Idempotency-Key"


@dataclass(frozen=True)
class IdempotencyRecord:
    fingerprint: str
    started_at: str  # ISO 8601
    result: Mapping[str, Any] | None = None  # None while the request is in flight
    version: str = ""  # the store's ETag, opaque


class IdempotencyKeyInFlight(Conflict):
    """A request with this key is still being processed."""

    retryable = True
    title = "A request with this Idempotency-Key is in flight"

    def __init__(self, key: str, started_at: str) -> None:
        super().__init__(
            f"The request with Idempotency-Key {key!r} that started at {started_at} is still "
            "being processed. Send it again later to get its response."
        )


class IdempotencyKeyReused(Unprocessable):
    """The key came back with another body (or target) than its first request."""

    title = "The Idempotency-Key was used for another request"

    def __init__(self, key: str) -> None:
        super().__init__(
            f"Idempotency-Key {key!r} was first sent with another request body. A key names "
            "one request: send this one with a new key."
        )


def idempotency_key(raw: str | None, *, required: bool) -> str | None:
    """The header's key: a string of 1 to 255 printable ASCII characters, bare or as a
    Structured Field string (``"..."``, the draft's form). ``raw`` is None when the request
    has no such header; a header that is there but empty or blank is refused, as is one that
    holds two keys (two headers reach the app joined by a comma). Raises ``InvalidInput``."""
    if raw is None:
        if required:
            raise InvalidInput(HEADER, "is required")
        return None
    value = raw.strip(" \t")
    if value.startswith('"'):
        value = _sf_string(value)
    elif "," in value:
        raise InvalidInput(HEADER, _ONE_KEY)
    if not value:
        raise InvalidInput(
            HEADER, f"must not be empty: send 1 to {MAX_KEY_LENGTH} characters, or no header"
        )
    if len(value) > MAX_KEY_LENGTH:
        raise InvalidInput(HEADER, f"must be at most {MAX_KEY_LENGTH} characters")
    if not all(" " <= c <= "~" for c in value):
        raise InvalidInput(HEADER, "must be printable ASCII (a UUID is a good key)")
    return value


_ONE_KEY = (
    "must hold one key (two Idempotency-Key headers reach the app joined by a comma): send "
    "the header once, with a key without commas"
)


def _sf_string(value: str) -> str:
    """The content of a Structured Field string (RFC 8941 3.3.3): ``\\"`` and ``\\\\`` are
    its only escapes, and nothing may follow the closing quote."""
    content: list[str] = []
    index = 1
    while index < len(value):
        char = value[index]
        if char == "\\":
            if index + 1 == len(value) or value[index + 1] not in '"\\':
                raise InvalidInput(HEADER, 'may escape only " and \\ inside its quotes')
            content.append(value[index + 1])
            index += 2
        elif char == '"':
            if value[index + 1 :].strip(" \t"):
                raise InvalidInput(HEADER, _ONE_KEY)
            return "".join(content)
        else:
            content.append(char)
            index += 1
    raise InvalidInput(HEADER, "opens a quoted string that it does not close")


def fingerprint(*parts: Any) -> str:
    """A digest of what makes two requests the same request (their canonical JSON)."""
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()
