"""The task message: a JSON body with the routing fields repeated as application properties.

Body::

    {"job_id": "...", "pipeline": "<its pipeline>", "task": "ProcessPayment",
     "step": 3, "is_last": false, "payload": {...}}

Parsing is strict: anything but exactly that shape raises ``MalformedMessage`` naming the field.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import MalformedMessage

CONTENT_TYPE = "application/json"
ROUTING_FIELDS = ("job_id", "pipeline", "task", "step", "is_last")


@dataclass(frozen=True)
class TaskMessage:
    job_id: str
    pipeline: str
    task: str
    step: int
    is_last: bool
    payload: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check(self.job_id, "job_id", str)
        _check(self.pipeline, "pipeline", str)
        _check(self.task, "task", str)
        _check(self.step, "step", int)
        _check(self.is_last, "is_last", bool)
        _check(self.payload, "payload", dict)
        for name in ("job_id", "pipeline", "task"):
            if not getattr(self, name).strip():
                raise MalformedMessage(name, "must not be empty")
        if self.step < 1:
            raise MalformedMessage("step", f"must be 1 or more, got {self.step}")

    def to_json(self) -> bytes:
        body = {name: getattr(self, name) for name in (*ROUTING_FIELDS, "payload")}
        return json.dumps(body, separators=(",", ":"), sort_keys=True).encode("utf-8")

    def application_properties(self) -> dict[str, str | int | bool]:
        return {name: getattr(self, name) for name in ROUTING_FIELDS}

    def message_id(self) -> str:
        """Deterministic, so a re-send is caught by duplicate detection."""
        return f"{self.job_id}:{self.step}"


def _check(value: Any, name: str, expected: type) -> None:
    # bool is a subclass of int: a step of `true` is as wrong as a step of "3".
    if expected is int and isinstance(value, bool):
        raise MalformedMessage(name, "must be an integer, got a boolean")
    if not isinstance(value, expected):
        raise MalformedMessage(
            name, f"must be {_TYPE_NAMES[expected]}, got {_TYPE_NAMES.get(type(value), 'other')}"
        )


_TYPE_NAMES: dict[type, str] = {
    str: "a string",
    int: "an integer",
    bool: "a boolean",
    dict: "an object",
    list: "an array",
    float: "a number",
    type(None): "null",
}


def parse_task_message(body: bytes | str) -> TaskMessage:
    """Parse a message body, or raise ``MalformedMessage`` naming what is wrong."""
    try:
        text = body.decode("utf-8") if isinstance(body, bytes | bytearray) else body
        document = json.loads(text)
    except UnicodeDecodeError as error:
        raise MalformedMessage("body", f"is not UTF-8 ({error.reason})") from error
    except json.JSONDecodeError as error:
        raise MalformedMessage("body", f"is not valid JSON ({error.msg} at {error.pos})") from error
    if not isinstance(document, dict):
        raise MalformedMessage("body", "must be a JSON object")
    for name in (*ROUTING_FIELDS, "payload"):
        if name not in document:
            raise MalformedMessage(name, "is missing")
    unknown = sorted(set(document) - {*ROUTING_FIELDS, "payload"})
    if unknown:
        raise MalformedMessage(unknown[0], "is not a field of a task message")
    return TaskMessage(**document)


def routing_hint(application_properties: Mapping[Any, Any] | None) -> tuple[int | None, bool]:
    """Best-effort (step, is_last) from application properties, for a message whose body
    cannot be parsed: lets the processor still clear state when the last message is broken."""
    props = plain_properties(application_properties)
    step = props.get("step")
    is_last = props.get("is_last")
    return (
        step if isinstance(step, int) and not isinstance(step, bool) else None,
        is_last if isinstance(is_last, bool) else False,
    )


def marked_last(body: bytes) -> bytes:
    """The body with ``is_last`` set: unchanged when it is set already or when the body does not
    parse (a sender can still mark such a message last through its application properties)."""
    try:
        message = parse_task_message(body)
    except MalformedMessage:
        return body
    return body if message.is_last else replace(message, is_last=True).to_json()


def plain_properties(properties: Mapping[Any, Any] | None) -> dict[str, Any]:
    """Application properties as they were sent. The AMQP decoder hands keys and string values
    back as bytes: they become str again (a value that is not UTF-8 was binary and stays bytes);
    a timestamp or a duration becomes text, so the properties can be stored as JSON."""
    plain: dict[str, Any] = {}
    for key, value in (properties or {}).items():
        name = key.decode("utf-8", "replace") if isinstance(key, bytes) else str(key)
        if isinstance(value, bytes):
            with contextlib.suppress(UnicodeDecodeError):  # binary: it stays bytes
                value = value.decode("utf-8")
        elif isinstance(value, dt.datetime | dt.date | dt.timedelta):
            value = str(value)
        plain[name] = value
    return plain


def body_bytes(body: Any) -> bytes:
    """A received message's body as bytes, whatever carried it: a data section (bytes, or the
    SDK's generator of byte chunks), a string value, or nothing."""
    if body is None:
        return b""
    if isinstance(body, bytes | bytearray | memoryview):
        return bytes(body)
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, Iterable):
        return b"".join(body_bytes(chunk) for chunk in body)
    raise TypeError(f"Unsupported message body type {type(body).__name__}")
