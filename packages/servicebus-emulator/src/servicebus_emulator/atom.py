"""Atom XML, as Service Bus's management API speaks it: entry and feed envelopes, the XML
values (booleans, ISO 8601 durations and instants, typed values of rule properties), an error
body, and reading the one description a request body carries.
"""

from __future__ import annotations

import re
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from .config import duration_ms

ATOM = "http://www.w3.org/2005/Atom"
CONNECT = "http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"
INSTANCE = "http://www.w3.org/2001/XMLSchema-instance"
SCHEMA = "http://www.w3.org/2001/XMLSchema"
SERIALIZATION = "http://schemas.microsoft.com/2003/10/Serialization/"
COUNTS = "http://schemas.microsoft.com/netservices/2011/06/servicebus"
FOREVER = "P10675199DT2H48M5.4775807S"  # TimeSpan.MaxValue: "never"
NEVER = "0001-01-01T00:00:00Z"
MAX_BODY = 1024 * 1024


class AtomError(ValueError):
    """A request body the API refuses (400), naming what is wrong."""


# ---------------------------------------------------------------------------------- values


def text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return escape(str(value))


def duration(ms: int | None) -> str:
    """Milliseconds as an ISO 8601 duration; None (no limit) as TimeSpan.MaxValue."""
    if ms is None:
        return FOREVER
    days, rest = divmod(ms, 86_400_000)
    hours, rest = divmod(rest, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds = f"{rest / 1000:.3f}".rstrip("0").rstrip(".")
    time = "".join(f"{n}{unit}" for n, unit in ((hours, "H"), (minutes, "M")) if n)
    time += f"{seconds}S" if rest else ""
    result = "P" + (f"{days}D" if days else "") + (f"T{time}" if time else "")
    return result if result != "P" else "PT0S"


def instant(ms: int | None) -> str:
    if not ms:
        return NEVER
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond:06d}0Z"


def entity_name(value: str) -> str:
    """A forwarding target as the SDKs send it (``sb://host/name`` or ``name``) -> the name."""
    match = re.match(r"^[a-z]+://[^/]*/(.*)$", value.strip(), re.IGNORECASE)
    return (match.group(1) if match else value.strip()).strip("/")


_XSD_PARSE: dict[str, Callable[[str], Any]] = {
    "string": str,
    "int": int,
    "long": int,
    "short": int,
    "byte": int,
    "unsignedInt": int,
    "unsignedLong": int,
    "double": float,
    "float": float,
    "decimal": float,
    "boolean": lambda v: v.strip().lower() == "true",
    "dateTime": lambda v: datetime.fromisoformat(v.strip().replace("Z", "+00:00")),
    "duration": lambda v: timedelta(milliseconds=_duration_ms(v)),
    "guid": uuid.UUID,
}


def _duration_ms(value: str) -> int:
    return duration_ms(value, "a rule property")


def typed_value(element: ET.Element) -> Any:
    """A <Value i:type="d6p1:int">3</Value> of a rule's properties or parameters."""
    kind = (element.get(f"{{{INSTANCE}}}type") or "string").rsplit(":", 1)[-1]
    parse = _XSD_PARSE.get(kind)
    if parse is None:
        raise AtomError(f"a rule property of type {kind!r} is not supported")
    try:
        return parse(element.text or "")
    except ValueError as error:
        raise AtomError(f"a rule property of type {kind} is not valid: {error}") from None


def typed_xml(value: Any) -> str:
    """The inverse of :func:`typed_value`: ``i:type="d6p1:…"`` and the text."""
    if isinstance(value, bool):
        kind, body = "boolean", text(value)
    elif isinstance(value, int):
        kind, body = ("int" if -(2**31) <= value < 2**31 else "long"), str(value)
    elif isinstance(value, float):
        kind, body = "double", repr(value)
    elif isinstance(value, datetime):
        kind, body = "dateTime", value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    elif isinstance(value, timedelta):
        kind, body = "duration", duration(int(value.total_seconds() * 1000))
    elif isinstance(value, uuid.UUID):
        return f'<Value i:type="d7p1:guid" xmlns:d7p1="{SERIALIZATION}">{value}</Value>'
    else:
        kind, body = "string", text(value)
    return f'<Value i:type="d6p1:{kind}" xmlns:d6p1="{SCHEMA}">{body}</Value>'


def key_values(items: dict[str, Any]) -> str:
    return "".join(
        f"<KeyValueOfstringanyType><Key>{text(key)}</Key>{typed_xml(value)}"
        "</KeyValueOfstringanyType>"
        for key, value in items.items()
    )


# ---------------------------------------------------------------------------------- envelopes


def entry(base_url: str, path: str, title: str, content: str, *, updated: int = 0) -> str:
    """One <entry> (the document of a GET, or one item of a feed when ``nested``)."""
    url = escape(f"{base_url}/{path}")
    stamp = instant(updated)
    return (
        f'<entry xmlns="{ATOM}"><id>{url}</id><title type="text">{text(title)}</title>'
        f"<published>{stamp}</published><updated>{stamp}</updated>"
        f"<author><name>sbemulatorns</name></author>"
        f'<link rel="self" href={quoteattr(f"{base_url}/{path}")}/>'
        f'<content type="application/xml">{content}</content></entry>'
    )


def feed(base_url: str, path: str, title: str, entries: Iterable[str]) -> str:
    url = escape(f"{base_url}/{path}")
    return (
        f'<feed xmlns="{ATOM}"><title type="text">{text(title)}</title><id>{url}</id>'
        f"<updated>{instant(1)}</updated>"
        f'<link rel="self" href={quoteattr(f"{base_url}/{path}")}/>' + "".join(entries) + "</feed>"
    )


def error(status: int, detail: str) -> str:
    return f"<Error><Code>{status}</Code><Detail>{text(detail)}</Detail></Error>"


def document(body: str) -> bytes:
    return ('<?xml version="1.0" encoding="utf-8"?>' + body).encode()


# ---------------------------------------------------------------------------------- requests


def description(body: bytes, expected: str) -> ET.Element:
    """The <QueueDescription> (or Topic…, Subscription…, Rule…) inside a request's entry."""
    if len(body) > MAX_BODY:
        raise AtomError(f"the request body is over {MAX_BODY} bytes")
    try:
        root = ET.fromstring(body)
    except ET.ParseError as failure:
        raise AtomError(f"the request body is not XML: {failure}") from None
    content = root.find(f"{{{ATOM}}}content") if root.tag == f"{{{ATOM}}}entry" else None
    found = None if content is None else content.find(f"{{{CONNECT}}}{expected}")
    if found is None:
        raise AtomError(
            f"the request body must be an Atom <entry> whose <content> holds a <{expected}>"
        )
    return found


def children(element: ET.Element) -> dict[str, ET.Element]:
    """The child elements of a description by local name."""
    return {child.tag.rsplit("}", 1)[-1]: child for child in element}


def local_type(element: ET.Element) -> str:
    return (element.get(f"{{{INSTANCE}}}type") or "").rsplit(":", 1)[-1]
