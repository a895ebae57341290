"""A local stand-in for the data plane of Azure Communication Services Email, for the local
stack: the app's ``azure-communication-email`` client sends to it as it would to Azure, and
what it accepts lands in a mailbox that the demo and the tests read. Nothing is relayed.

What it serves, each as Microsoft documents it:

- ``POST /emails:send?api-version=…``: the ``EmailMessage`` body, an optional ``Operation-Id``
  (the operation's id; else one is made), answered ``202`` with ``{"id", "status": "Running"}``
  and an ``Operation-Location`` header (REST reference "Email - Send", API versions
  2023-03-31 and 2025-09-01: learn.microsoft.com/rest/api/communication/dataplane/email/send;
  azure-rest-api-specs, ``specification/communication/data-plane/Email/stable/2025-09-01``).
  The request's total size is limited to 10 MB, as the reference says of attachments.
- ``GET /emails/operations/{id}?api-version=…``: the operation's ``EmailSendResult``,
  ``Running`` then ``Succeeded`` (or ``Failed`` with an ``EmailDropped`` error for an address
  the stand-in was told to drop), the REST reference "Email - Get Send Result".
- Repeatable requests (OASIS Repeatable Requests 1.0, as Microsoft's "Repeatability of
  Requests" page for the Email Send API states them, docs-ref-conceptual/communication/
  repeatable-requests.md): ``Repeatability-Request-Id`` (a GUID) with
  ``Repeatability-First-Sent`` (IMF-fixdate); either malformed, or one without the other,
  ``400``; a first-sent time older than the tracked window (5 minutes) ``412``; a repeat
  within the window that differs from the first request ``400``; a repeat while the first
  is still being handled ``409``; any other repeat answers what the first got (2xx or 4xx)
  without sending again, and a first that got a 5xx is carried out again.

``localdev.email_http`` serves it over HTTP, with the requests signed as Azure wants them.

What differs from Azure: the sender's domain is not checked against linked domains; a message is
"delivered" into the mailbox when it is accepted, and its operation is ``Running`` until the
first status read after ``delivery_seconds``; no ``retry-after`` is sent unless
``retry_after`` is set (Azure's example answers 20 s); an ``Operation-Id`` sent again without
repeatability headers starts another send (Microsoft documents no rule for it); engagement
tracking, suppression lists, quotas and throttling (``429``) are not modelled.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any

from localdev.email_message import SentEmail, parse_message

API_VERSIONS = frozenset({"2023-03-31", "2024-07-01-preview", "2025-09-01"})
TRACKED_WINDOW = timedelta(minutes=5)
MAX_REQUEST_BYTES = 10 * 1024 * 1024

_IMF_FIXDATE = re.compile(
    r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
    r"\d{4} \d{2}:\d{2}:\d{2} GMT$"
)


@dataclass(frozen=True)
class Reply:
    status: int
    body: Mapping[str, Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass
class _Operation:
    accepted: datetime
    failed: bool


@dataclass
class _Tracked:
    """A repeatable request within the window: its body, and the reply once it has one."""

    first_sent: datetime
    body: Any
    reply: Reply | None = None  # None while the first request is being handled


class EmailService:
    """The stand-in's state (operations, repeatable requests, the mailbox) and its answers;
    ``run_email_service`` puts it behind HTTP. Thread-safe."""

    def __init__(
        self,
        *,
        base_url: str = "",
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        delivery_seconds: float = 0.0,
        retry_after: int | None = None,
        drop: frozenset[str] = frozenset(),
        echo: bool = False,
    ) -> None:
        self.base_url = base_url
        self.clock = clock
        self.delivery_seconds = delivery_seconds
        self.retry_after = retry_after
        self.drop = {address.lower() for address in drop}
        self.echo = echo
        self._lock = threading.Condition()
        self._operations: dict[str, _Operation] = {}
        self._tracked: dict[str, _Tracked] = {}
        self._sent: list[SentEmail] = []
        self._parsed: list[EmailMessage] = []
        self.sends = 0  # POSTs answered, repeats included

    # -- the REST operations -----------------------------------------------------------------

    def send(self, api_version: str | None, headers: Mapping[str, str], body: bytes) -> Reply:
        """``POST /emails:send`` (headers by lower-case name)."""
        if (problem := _api_version_problem(api_version)) is not None:
            return problem
        assert api_version is not None
        if len(body) > MAX_REQUEST_BYTES:
            return error_reply(413, "RequestTooLarge", "The request is larger than 10 MB.")
        try:
            document = json.loads(body)
        except ValueError:
            return error_reply(400, "InvalidRequest", "The body is not JSON.")
        request_id = headers.get("repeatability-request-id")
        first_sent_text = headers.get("repeatability-first-sent")
        if request_id is None and first_sent_text is None:
            return self._carry_out(api_version, headers, document, None)
        if request_id is None or first_sent_text is None or not _is_guid(request_id):
            return error_reply(
                400,
                "InvalidRepeatabilityHeaders",
                "Repeatability-Request-Id must be a GUID, sent with Repeatability-First-Sent.",
            )
        first_sent = _imf_fixdate(first_sent_text)
        if first_sent is None:
            return error_reply(
                400,
                "InvalidRepeatabilityHeaders",
                "Repeatability-First-Sent must be an IMF-fixdate (RFC 7231).",
            )
        with self._lock:
            self._forget_old()
            if first_sent < self.clock() - TRACKED_WINDOW:
                return error_reply(
                    412,
                    "PreconditionFailed",
                    "Repeatability first sent header was not in 5 minutes window.",
                )
            tracked = self._tracked.get(request_id)
            if tracked is not None:
                if tracked.body != document:
                    return error_reply(
                        400,
                        "RepeatabilityRequestMismatch",
                        "The request repeats an earlier one's Repeatability-Request-Id with "
                        "another body.",
                    )
                if tracked.reply is None:
                    return error_reply(
                        409, "RequestInProgress", "The first request is still being handled."
                    )
                if tracked.reply.status < 500:
                    self.sends += 1
                    return tracked.reply
            self._tracked[request_id] = _Tracked(first_sent, document)
        reply = self._carry_out(api_version, headers, document, request_id)
        with self._lock:
            self._tracked[request_id].reply = reply
        return reply

    def operation(self, api_version: str | None, operation_id: str) -> Reply:
        """``GET /emails/operations/{id}``."""
        if (problem := _api_version_problem(api_version)) is not None:
            return problem
        with self._lock:
            known = self._operations.get(operation_id.lower())
            now = self.clock()
        if known is None:
            return error_reply(404, "NotFound", f"There is no operation {operation_id}.")
        if known.failed:
            body: dict[str, Any] = {
                "id": operation_id,
                "status": "Failed",
                "error": {
                    "code": "EmailDropped",
                    "message": "Email was dropped after several attempts to deliver.",
                },
            }
            return Reply(200, body)
        if now - known.accepted < timedelta(seconds=self.delivery_seconds):
            return Reply(200, {"id": operation_id, "status": "Running"}, self._retry_headers())
        return Reply(200, {"id": operation_id, "status": "Succeeded"})

    # -- the mailbox -------------------------------------------------------------------------

    def sent(self) -> list[SentEmail]:
        """Every message accepted (and not dropped) so far, in order."""
        with self._lock:
            return list(self._sent)

    def received(self) -> list[EmailMessage]:
        """Every message so far as a mail client would see it, parsed once each."""
        with self._lock:
            for sent in self._sent[len(self._parsed) :]:
                self._parsed.append(sent.as_message())
            return list(self._parsed)

    def count(self) -> int:
        with self._lock:
            return len(self._sent)

    def message_ids(self, start: int = 0) -> list[str]:
        """The Message-ID header of each message from the ``start``-th on."""
        with self._lock:
            return [sent.headers.get("Message-ID", "") for sent in self._sent[start:]]

    def wait_for_more(self, count: int, timeout: float) -> bool:
        """Block until more than ``count`` messages have arrived, or ``timeout`` seconds."""
        with self._lock:
            return self._lock.wait_for(lambda: len(self._sent) > count, timeout)

    # -- internals -----------------------------------------------------------------------------

    def _carry_out(
        self, api_version: str, headers: Mapping[str, str], document: Any, request_id: str | None
    ) -> Reply:
        try:
            email = parse_message(document, request_id)
        except ValueError as error:
            return error_reply(400, "InvalidRequest", str(error))
        operation_id = headers.get("operation-id") or str(uuid.uuid4())
        if not _is_guid(operation_id):
            return error_reply(400, "InvalidRequest", "Operation-Id must be a GUID.")
        email = SentEmail(**{**email.__dict__, "operation_id": operation_id})
        dropped = bool(self.drop.intersection(address.lower() for address in email.to))
        with self._lock:
            self.sends += 1
            self._operations[operation_id.lower()] = _Operation(self.clock(), dropped)
            if not dropped:
                self._sent.append(email)
                self._lock.notify_all()
        if self.echo and not dropped:
            print(f"[email] {email.subject} -> {', '.join(email.to)}", flush=True)
        location = f"{self.base_url}/emails/operations/{operation_id}?api-version={api_version}"
        return Reply(
            202,
            {"id": operation_id, "status": "Running"},
            {"Operation-Location": location, **self._retry_headers()},
        )

    def _retry_headers(self) -> dict[str, str]:
        return {} if self.retry_after is None else {"retry-after": str(self.retry_after)}

    def _forget_old(self) -> None:
        oldest = self.clock() - TRACKED_WINDOW
        for request_id in [r for r, t in self._tracked.items() if t.first_sent < oldest]:
            del self._tracked[request_id]


def _api_version_problem(api_version: str | None) -> Reply | None:
    if api_version in API_VERSIONS:
        return None
    return error_reply(
        400,
        "UnsupportedApiVersion",
        f"api-version {api_version!r} is not one of {', '.join(sorted(API_VERSIONS))}.",
    )


def error_reply(status: int, code: str, message: str) -> Reply:
    return Reply(status, {"error": {"code": code, "message": message}}, {"x-ms-error-code": code})


def _is_guid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def _imf_fixdate(value: str) -> datetime | None:
    if not _IMF_FIXDATE.match(value):
        return None
    try:
        return parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None


def imf_fixdate(moment: datetime) -> str:
    """``moment`` as an IMF-fixdate, the form of Repeatability-First-Sent."""
    return format_datetime(moment.astimezone(UTC), usegmt=True)
