"""What the console's templates show, shaped from what the services return."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import quote, urlencode

from ..domain.archive import ArchivedMessage, FailedSession

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
    """JSON pretty-printed (keys in their order), else UTF-8 text, else a hex dump."""
    try:
        text = json.dumps(json.loads(raw), indent=2, ensure_ascii=False)
        kind = "JSON"
    except (ValueError, UnicodeDecodeError):
        try:
            text, kind = raw.decode("utf-8"), "text"
        except UnicodeDecodeError:
            text, kind = raw.hex(" ", 1), "binary"
    return Body(kind, text[:BODY_SHOWN_MAX], len(raw), len(text) > BODY_SHOWN_MAX)


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
