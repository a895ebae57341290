"""What the console's templates show, shaped from what the services return."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import quote, urlencode

from ...domain.archive import ArchivedMessage, FailedSession

BODY_SHOWN_MAX = 64 * 1024  # characters of a body the page shows; the rest is cut with a note


@dataclass(frozen=True)
class Body:
    kind: str  # "JSON", "text" or "binary"
    text: str  # pretty-printed JSON, the text, or a hex dump of a binary body
    size: int  # bytes
    cut: bool  # more than BODY_SHOWN_MAX characters: the page shows the start


@dataclass(frozen=True)
class TimelineEntry:
    message: ArchivedMessage
    body: Body

    @property
    def title(self) -> str:
        step = f"Step {self.message.step}" if self.message.step is not None else "Step ?"
        return f"{step} · {self.message.task or '(unreadable message)'}"


def body_of(raw: bytes) -> Body:
    """JSON pretty-printed (keys in their order), else UTF-8 text, else a hex dump. Characters
    that do not show themselves (bidi controls such as U+202E, which would show the text
    around them reversed, zero-width and other format or control characters) are shown as
    their ``\\uXXXX`` escape, so an operator sees what the message holds."""
    try:
        text = json.dumps(json.loads(raw), indent=2, ensure_ascii=False)
        kind = "JSON"
    except (ValueError, UnicodeDecodeError):
        try:
            text, kind = raw.decode("utf-8"), "text"
        except UnicodeDecodeError:
            text, kind = raw.hex(" ", 1), "binary"
    text = _CANDIDATES.sub(_shown, text)
    return Body(kind, text[:BODY_SHOWN_MAX], len(raw), len(text) > BODY_SHOWN_MAX)


# Anything but printable ASCII and the line breaks and tabs a body is laid out with; of those,
# the format characters (Cf), the other controls, lone surrogates and the line and paragraph
# separators are escaped.
_CANDIDATES = re.compile(r"[^\x20-\x7e\n\r\t]")
_INVISIBLE = frozenset({"Cf", "Cc", "Cs", "Zl", "Zp"})


def _shown(found: re.Match[str]) -> str:
    char = found.group()
    return f"\\u{ord(char):04x}" if unicodedata.category(char) in _INVISIBLE else char


def timeline(rows: Iterable[ArchivedMessage]) -> list[TimelineEntry]:
    """The session's archived messages in send order, each with its body ready to read."""
    return [TimelineEntry(row, body_of(row.body)) for row in rows]


def session_path(base: str, session_id: str) -> str:
    """A session's page; ids may hold '/', so it is escaped (the binding decodes it)."""
    return f"{base}/sessions/{quote(session_id, safe='')}"


def sessions_query(**filters: str | None) -> str:
    return urlencode({name: value for name, value in filters.items() if value})


def context_items(summary: FailedSession) -> list[tuple[str, str]]:
    return [(str(name), _plain(value)) for name, value in sorted(summary.context.items())]


def _plain(value: object) -> str:
    if isinstance(value, Mapping | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)
