"""The record of a job's receipt e-mail: written before the first attempt to send it, kept by
the job (not the session, so a replay finds it), and updated with each attempt's outcome.

Its ``request_id`` is derived from the job and the step (and the ``generation``, which moves on
only after the mail service refused the e-mail outright), so a redelivery, another instance or
a replay of the same task sends the same request. Its ``first_sent`` is the time of the first
attempt of that request, which a repeatable request carries unchanged (OASIS Repeatable
Requests 1.0, ``Repeatability-First-Sent``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

ReceiptEmailStatus = Literal["sending", "retrying", "sent", "may-have-been-sent", "failed"]

# An attempt is under way, or was cut short (a crash) before its outcome was written.
SENDING: Literal["sending"] = "sending"
# The last attempt failed in a way that may pass; the next one sends the same request.
RETRYING: Literal["retrying"] = "retrying"
SENT: Literal["sent"] = "sent"
# The mail service can no longer tell whether the request was carried out (past its window
# for repeats), or an attempt that cannot be repeated safely was cut short: a person decides.
MAY_HAVE_BEEN_SENT: Literal["may-have-been-sent"] = "may-have-been-sent"
# The mail service refused it; the next attempt (a replay, after a fix) is a new request.
FAILED: Literal["failed"] = "failed"

# Nothing is sent again for a record in one of these.
SETTLED: frozenset[str] = frozenset({SENT, MAY_HAVE_BEEN_SENT})

_NAMESPACE = uuid.UUID("9f3c1f4e-6f7a-4d2b-9a51-2c8e0b7d4a10")


def receipt_request_id(job_id: str, step: int, generation: int = 1) -> str:
    """The send's request id (a GUID, as Repeatability-Request-Id and Operation-Id want):
    the same for the same job, step and generation, in any process."""
    return str(uuid.uuid5(_NAMESPACE, f"{job_id}\n{step}\n{generation}"))


@dataclass(frozen=True)
class ReceiptEmail:
    job_id: str
    to: str
    status: ReceiptEmailStatus
    request_id: str
    first_sent: datetime  # timezone-aware (UTC)
    sender: str  # which adapter sends it: "acs" or "smtp"
    generation: int = 1
    attempts: int = 1
    operation_id: str | None = None  # the mail service's id of the send, once it gave one
    detail: str | None = None  # what the last attempt left a person to know
    updated_at: str | None = None

    @property
    def settled(self) -> bool:
        return self.status in SETTLED
