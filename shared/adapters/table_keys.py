"""Table keys built from outside values (job ids, idempotency keys).

Azure Tables forbids ``/``, ``\\``, ``#``, ``?`` and control characters in keys and caps them at
1 KiB. Values made only of safe characters are used as they are, so the table stays readable;
anything else is base64url-encoded behind a ``~`` that a plain value can never start with, so
two different values never share a key. Keys an adapter keeps for itself start with ``!``.
"""

from __future__ import annotations

import base64
import hashlib
import re

_PLAIN = re.compile(r"^[A-Za-z0-9._:@-]{1,256}$")
_MAX_ENCODED = 512


def escape_key(value: str) -> str:
    """A valid, injective PartitionKey/RowKey for ``value``."""
    if _PLAIN.match(value):
        return value
    encoded = base64.urlsafe_b64encode(value.encode("utf-8")).decode("ascii").rstrip("=")
    if len(encoded) <= _MAX_ENCODED:
        return f"~{encoded}"
    # Too long to keep whole: a digest is still unique for any practical purpose.
    return f"~sha256-{hashlib.sha256(value.encode('utf-8')).hexdigest()}"


# -- session ids as keys: readable where they can be, every one reversible -----------------------

_NO_SESSION = "~"  # a lone '~' is never produced by escaping a real session id
_FORBIDDEN = set("/\\#?~") | {chr(c) for c in (*range(0x00, 0x20), *range(0x7F, 0xA0))}


def session_key(session_id: str | None) -> str:
    """A valid PartitionKey for any session id Service Bus accepts ('/', '\\', '#', '?',
    control characters, 128 characters), and reversible: ``~XX`` per escaped character."""
    if session_id is None:
        return _NO_SESSION
    return "".join(f"~{ord(c):02X}" if c in _FORBIDDEN else c for c in session_id)


def session_id_of(key: str) -> str | None:
    if key == _NO_SESSION:
        return None
    out, i = [], 0
    while i < len(key):
        if key[i] == "~":
            out.append(chr(int(key[i + 1 : i + 3], 16)))
            i += 3
        else:
            out.append(key[i])
            i += 1
    return "".join(out)
