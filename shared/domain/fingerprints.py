"""Failures that share a root cause: the same (queue, task, reason) and a description that is
the same once its variable parts (ids, numbers, amounts, card tokens, timestamps) are
normalised. "card tok_amex_0005 ... after 2 attempts" and "card tok_amex_0017 ... after 3
attempts" are one fingerprint; "SKU UNICORN-TEA" and "SKU DRAGON-TEA" are two."""

from __future__ import annotations

import hashlib
import re

# A token with a digit in it (an id, a number, an amount, a date); its trailing punctuation is
# the sentence's, not the token's.
_TOKEN = re.compile(r"[\w.:/+@-]*\d[\w.:/+@-]*")
_NUMBER = re.compile(r"[+-]?\d+(?:[.,]\d+)?")
_TRAILING = ".:,-/"


def normalise(description: str) -> str:
    """The description with each token that holds a digit replaced: ``<n>`` for a number or
    an amount, ``<id>`` for anything else (ids, card tokens, order numbers, timestamps)."""

    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        core = token.rstrip(_TRAILING)
        tail = token[len(core) :]
        if not core:
            return token
        return ("<n>" if _NUMBER.fullmatch(core) else "<id>") + tail

    return _TOKEN.sub(replace, " ".join(description.split()))


def fingerprint(queue: str, task: str | None, reason: str, description: str) -> str:
    """12 hex digits, the same for failures with one root cause (see ``normalise``)."""
    text = "\n".join((queue, task or "", reason, normalise(description)))
    return hashlib.sha256(text.encode()).hexdigest()[:12]
