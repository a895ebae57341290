"""Table keys built from outside values: session ids, job ids, SKUs, idempotency keys.

Azure Tables forbids ``/``, ``\\``, ``#``, ``?`` and control characters in a PartitionKey or
RowKey and caps it at 1 KiB. ``table_key`` keeps every other character, so the table stays
readable, and writes each forbidden one, and ``~`` and ``!``, as ``~XX`` (its code point in
hex): two different values never share a key, and ``value_of_table_key`` gives the value back.
A key an adapter keeps for itself starts with ``!``, which no escaped value does. A value
whose escaped form would not fit is keyed by its SHA-256 digest (``~sha256~<hex>``, which no
escaped value is: ``~s`` is no escape); such a row keeps the value itself in a column.
"""

from __future__ import annotations

import hashlib

NO_VALUE = "~"  # the key of None (no session id): a lone '~' is never an escaped value
MAX_KEY_LENGTH = 512
_DIGEST = "~sha256~"
_ESCAPED = set("/\\#?~!") | {chr(c) for c in (*range(0x00, 0x20), *range(0x7F, 0xA0))}


def table_key(value: str | None) -> str:
    """A valid, injective PartitionKey/RowKey for ``value``."""
    if value is None:
        return NO_VALUE
    key = "".join(f"~{ord(c):02X}" if c in _ESCAPED else c for c in value)
    if len(key) <= MAX_KEY_LENGTH:
        return key
    return _DIGEST + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def value_of_table_key(key: str) -> str | None:
    """The value ``table_key`` made ``key`` from; raises ``ValueError`` for a digest key."""
    if key == NO_VALUE:
        return None
    if key.startswith(_DIGEST):
        raise ValueError("a digest key cannot be turned back into its value")
    out, i = [], 0
    while i < len(key):
        if key[i] == "~":
            out.append(chr(int(key[i + 1 : i + 3], 16)))
            i += 3
        else:
            out.append(key[i])
            i += 1
    return "".join(out)
