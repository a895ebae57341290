"""One root error class for everything the app raises on purpose, and its kinds.

Each kind says what the caller can do about it: fix the input, ask for something that exists,
wait for a conflicting operation, or try again later. Whether trying again may help is a
property, ``retryable``, never a string match. Adapters translate the SDKs' exceptions into
these kinds (``shared.adapters.azure_errors``); the HTTP bindings map each kind to a status
(``shared.entrypoints.http``) and the processor maps task errors to settlements.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar


class PipelineError(Exception):
    """Root of every error this app raises on purpose."""

    retryable: ClassVar[bool] = False
    title: ClassVar[str] = "The request could not be completed"

    @property
    def members(self) -> Mapping[str, Any]:
        """What the error knows beyond its message, for a client to act on (a problem
        document's extension members)."""
        return {}


class MalformedMessage(PipelineError):
    """A task message that cannot be understood. ``field`` names what is wrong."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class InvalidInput(PipelineError):
    """Input from a caller (an order, a product row, a query) that breaks a rule. ``field``
    names it and ``problem`` says the rule, with its limit."""

    title = "The request is not valid"

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class TooLarge(InvalidInput):
    """Input over a size limit (a body, a batch of messages)."""

    title = "The request is too large"


class UnsupportedMediaType(InvalidInput):
    """A body sent with a content type the route does not read (it names the one it does)."""

    title = "The content type is not supported"


class Forbidden(PipelineError):
    """The caller is known but their role does not allow the action: nothing was done."""

    title = "Your role does not allow this"

    def __init__(self, detail: str, *, role: str | None, required: str) -> None:
        super().__init__(detail)
        self.role = role
        self.required = required

    @property
    def members(self) -> Mapping[str, Any]:
        return {"role": self.role, "required_role": self.required}


class NotFound(PipelineError, LookupError):
    """What the caller asked for does not exist."""

    title = "Not found"


class Conflict(PipelineError):
    """The current state forbids the request now (another replay won, the same request is
    still in flight, a lock is held): waiting, or choosing another resource, can help."""

    title = "The request conflicts with the current state"


class Unprocessable(PipelineError):
    """Well-formed, but it contradicts an earlier request (an Idempotency-Key reused with
    another body): sending it again will never work."""

    title = "The request cannot be processed"


# The service a session's state and settlements go through: its failures are not a task's.
SERVICE_BUS = "Service Bus"


class ServiceUnavailable(PipelineError):
    """A backing service (Table Storage, Blob Storage, a Storage queue, Service Bus) could not
    be reached or answered with a server error; nothing was changed that a retry would do
    twice."""

    retryable = True
    title = "A backing service is unavailable"

    def __init__(self, service: str, detail: str) -> None:
        super().__init__(f"{service} could not be reached ({detail}).")
        self.service = service

    @property
    def dependency(self) -> str:
        """What could not be reached: the service."""
        return self.service

    @property
    def reason(self) -> str:
        """A short machine-readable code naming the service (``TableStorageUnavailable``), for
        a task that gives up on it (its dead-letter reason)."""
        words = re.findall(r"[A-Za-z0-9]+", self.service)
        return "".join(w[:1].upper() + w[1:] for w in words if w != "the") + "Unavailable"


class SendUnconfirmed(ServiceUnavailable):
    """Service Bus took a send but did not confirm it in time: the messages may have gone
    out. ``job_id`` names the job they belong to, once known, so the caller can look before
    it sends again."""

    def __init__(self, detail: str, *, job_id: str | None = None) -> None:
        super().__init__(SERVICE_BUS, detail)
        self.job_id = job_id

    @property
    def members(self) -> Mapping[str, Any]:
        return {"job_id": self.job_id} if self.job_id else {}


class SessionLocked(Conflict):
    """Another receiver holds the session's lock (the processor is running it, or another
    request is setting it up); it is released when that work ends."""

    retryable = True
    title = "The session is busy"


class SessionTooLarge(TooLarge):
    """The messages of one session do not fit in one batch, so they cannot be sent atomically."""

    def __init__(self, problem: str) -> None:
        super().__init__("body", problem)


class TaskFailed(PipelineError):
    """A task could not do its work. ``reason`` is a short machine-readable code that ends up
    as the dead-letter reason; ``description`` tells a person what happened and what to do."""

    def __init__(self, reason: str, description: str) -> None:
        super().__init__(f"{reason}: {description}")
        self.reason = reason
        self.description = description


class PermanentTaskError(TaskFailed):
    """Retrying cannot help (declined card, unknown SKU, invalid row)."""


class TransientTaskError(TaskFailed):
    """Retrying later may help (a provider outage, a timeout). ``dependency`` names what was
    out of reach (``payment provider``): such failures count towards the pipeline's circuit
    (shared.service_layer.circuits). Without one (a conflict between workers, say), the
    failure is retried but says nothing about an outage."""

    retryable = True

    def __init__(self, reason: str, description: str, *, dependency: str | None = None) -> None:
        super().__init__(reason, description)
        self.dependency = dependency


class MayHaveBeenSent(PipelineError):
    """The mail service cannot tell whether it carried out a repeated send (the request's
    first attempt is older than the window in which it recognises repeats): sending it again
    might mail the customer twice, so a person decides."""

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description
