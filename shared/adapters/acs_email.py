"""E-mail through Azure Communication Services Email (``azure-communication-email``).

A send is ``POST /emails:send`` with the e-mail as an ``EmailMessage`` (the PDF as a base64
attachment, the Message-ID as a custom header), an ``Operation-Id`` and, when the caller makes
it repeatable, ``Repeatability-Request-Id`` (the same GUID) and ``Repeatability-First-Sent``
(the first attempt's time, IMF-fixdate). Microsoft's "Repeatability of Requests" page for the
Email Send API (OASIS Repeatable Requests 1.0) says what the service does with them: within
its tracked window (5 minutes) a repeat of a request is not carried out again and answers what
the first got (409 while the first is still being handled); a first-sent time outside the
window answers ``412``, which this adapter raises as ``MayHaveBeenSent``. The send is a
long-running operation: the SDK's poller follows ``Operation-Location`` until ``Succeeded``,
``Failed`` or ``Canceled`` (the REST reference "Email - Send", "Email - Get Send Result").

Failures are sorted as for SMTP: the service unreachable, a timeout, throttling (429), a
server error, a repeat still in progress (409) or an operation still running after
``timeout`` are ``TransientTaskError`` (a repeat is safe: it is the same request); a request
the service refuses (400, 413), an operation that ends ``Failed`` or ``Canceled``, and a
refused sign-in (401, 403: the app's identity lacks its role) are ``PermanentTaskError``.
"""

from __future__ import annotations

import base64
import json
import uuid
from email.utils import format_datetime
from typing import Any

from azure.communication.email import EmailClient
from azure.core.credentials import AzureKeyCredential
from azure.core.exceptions import HttpResponseError, ServiceRequestError, ServiceResponseError
from azure.core.utils import parse_connection_string

from ..config import EMAIL_CONNECTION, ConfigurationError, EmailServiceConnectionSettings
from ..domain.errors import MayHaveBeenSent, PermanentTaskError, TransientTaskError
from ..service_layer.ports import Email, Repeatability
from .azure_clients import identity_credential
from .email_messages import REJECTED, UNAVAILABLE, customer_mailbox, scalar_values

_TRANSIENT_STATUSES = frozenset({408, 409, 429})


class AcsEmailSender:
    """Implements EmailSender with an ``EmailClient`` built once (``azure_clients``)."""

    name = "acs"
    repeatable = True

    def __init__(
        self,
        client: EmailClient,
        *,
        sender: str,
        endpoint: str,
        poll_interval: float = 0.25,
        timeout: float = 120.0,
    ) -> None:
        self._client = client
        self._sender = sender
        self._endpoint = endpoint
        self._poll_interval = poll_interval  # when the service sends no retry-after
        self._timeout = timeout

    def send(self, email: Email, *, repeat: Repeatability | None = None) -> str:
        """Send ``email`` and follow the send to its end; returns its operation id."""
        to = customer_mailbox(email.to)
        operation_id = repeat.request_id if repeat else str(uuid.uuid4())
        headers = {}
        if repeat is not None:
            headers = {
                "Repeatability-Request-Id": repeat.request_id,
                "Repeatability-First-Sent": format_datetime(repeat.first_sent, usegmt=True),
            }
        try:
            poller = self._client.begin_send(
                self._message(email, to.address()),
                operation_id=operation_id,
                headers=headers,
                polling_interval=self._poll_interval,
            )
            result = poller.result(timeout=self._timeout)
        except HttpResponseError as error:
            raise self._refusal(error, email.to) from error
        except (ServiceRequestError, ServiceResponseError) as error:
            raise TransientTaskError(
                UNAVAILABLE,
                f"Could not reach Azure Communication Services Email at {self._endpoint} "
                f"({type(error).__name__}: {error}). The e-mail will be sent again later (the "
                "same request, so it goes out once).",
            ) from error
        if not poller.done():
            raise TransientTaskError(
                UNAVAILABLE,
                f"The send of operation {operation_id} was still running after "
                f"{self._timeout:.0f} s. It will be followed again (the same request).",
            )
        status = (result or {}).get("status")
        if status != "Succeeded":
            raise PermanentTaskError(
                REJECTED,
                f"Azure Communication Services Email ended operation {operation_id} "
                f"{status}: {_error_text(result)}. Check the address {email.to}, then send "
                "the receipt again.",
            )
        return operation_id

    def _message(self, email: Email, address: str) -> dict[str, Any]:
        return {
            "senderAddress": self._sender,
            "recipients": {"to": [{"address": address}]},
            "content": {
                "subject": scalar_values(email.subject),
                "plainText": scalar_values(email.text),
            },
            "headers": {"Message-ID": _bracketed(email.message_id)},
            "attachments": [
                {
                    "name": attachment.filename,
                    "contentType": attachment.content_type,
                    "contentInBase64": base64.b64encode(attachment.content).decode("ascii"),
                }
                for attachment in email.attachments
            ],
        }

    def _refusal(self, error: HttpResponseError, to: str) -> Exception:
        """What an error answer of the service means to the task."""
        status = error.status_code or 0
        text = _answer_text(error)
        if status == 412:
            return MayHaveBeenSent(
                "Azure Communication Services Email no longer recognises this send (its first "
                f"attempt is older than the service's window for repeats: {text}), so it "
                "cannot tell whether it went out. It was not sent again. Check the e-mail "
                "logs of the Communication Services resource for the operation id before "
                "sending it again."
            )
        if status < 400:  # the operation's own failure, read by the poller (200 Failed)
            return PermanentTaskError(
                REJECTED,
                f"Azure Communication Services Email did not send the e-mail to {to} "
                f"({text}). Check the address, then send the receipt again.",
            )
        if status >= 500 or status in _TRANSIENT_STATUSES:
            return TransientTaskError(
                UNAVAILABLE,
                f"Azure Communication Services Email answered {status} ({text}). The e-mail "
                "will be sent again later (the same request, so it goes out once).",
            )
        if status in (401, 403):
            return PermanentTaskError(
                REJECTED,
                f"Azure Communication Services Email refused the app's sign-in ({status}: "
                f"{text}). Give the app's identity the Communication and Email Service Owner "
                "role on the resource (or fix CommunicationServicesConnection), then replay "
                "the message.",
            )
        return PermanentTaskError(
            REJECTED,
            f"Azure Communication Services Email refused the e-mail to {to} ({status}: "
            f"{text}). Fix what it names (the sender {self._sender}, RECEIPT_EMAIL_FROM, the "
            "address or the message), then send the receipt again.",
        )


def _answer_text(error: HttpResponseError) -> str:
    odata = getattr(error, "error", None)
    if odata is not None and getattr(odata, "code", None):
        return f"{odata.code}: {odata.message}"
    try:
        body = json.loads(error.response.text()) if error.response is not None else None
    except ValueError:
        body = None
    return _error_text(body) if isinstance(body, dict) else str(error.message or error)


def _error_text(document: Any) -> str:
    error = document.get("error") if isinstance(document, dict) else None
    if isinstance(error, dict):
        return f"{error.get('code')}: {error.get('message')}"
    return "no error was given"


def _bracketed(message_id: str) -> str:
    stripped = message_id.strip()
    return stripped if stripped.startswith("<") else f"<{stripped}>"


def email_client(settings: EmailServiceConnectionSettings) -> EmailClient:
    """A client for a connection string (the local stand-in's: ``endpoint=http://…;
    accesskey=…``, signed with the key) or, without one, for the resource's endpoint with the
    app's identity. The SDK's own ``from_connection_string`` would turn an ``http`` endpoint
    into ``https``, so the connection string is read here. The SDK's own retries are off: a
    failed send or status read (a dropped connection, a 5xx, a 429 with its Retry-After) is
    the task's transient error, retried by the processor with its backoff, as the same
    request (retries live in one layer)."""
    if settings.connection_string:
        parts = parse_connection_string(settings.connection_string)  # keys lowercased
        if not parts.get("endpoint") or not parts.get("accesskey"):
            raise ConfigurationError(f"{EMAIL_CONNECTION} must be endpoint=<url>;accesskey=<key>.")
        endpoint, credential = parts["endpoint"], AzureKeyCredential(parts["accesskey"])
        return EmailClient(endpoint.rstrip("/"), credential, retry_total=0)
    if not settings.endpoint:
        raise ConfigurationError(
            f"Set {EMAIL_CONNECTION}__endpoint (the Communication Services resource, e.g. "
            f"https://<name>.<geography>.communication.azure.com, reached with the app's "
            f"identity) or {EMAIL_CONNECTION} (a connection string), or EMAIL_SENDER=smtp."
        )
    return EmailClient(settings.endpoint, identity_credential(settings.client_id), retry_total=0)
