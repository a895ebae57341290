"""Documents the tests of several packages build the same way."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from shared.bootstrap import app_pipelines
from shared.config import Settings
from shared.domain.envelope import TaskMessage
from shared.domain.pipelines import PURCHASE, PURCHASE_TASKS, Pipelines
from shared.service_layer.ports import DeadLetter

# The pipelines the app ships (the list, without PIPELINE_MODULES): what the services are
# handed in the tests.
PIPELINES: Pipelines = app_pipelines({}).declared

# The settings the app cannot start without, and nothing optional: each declared pipeline's
# queue under its default name, and the local emulator's and Azurite's well-known connection
# strings (no service is contacted until a client is used).
APP_SETTINGS = {
    **{p.queue_setting: p.default_queue for p in PIPELINES},
    "REPLAY_QUEUE_NAME": "replay-requests",
    "ServiceBusConnection": "Endpoint=sb://localhost;SharedAccessKeyName=k;SharedAccessKey=v;"
    "UseDevelopmentEmulator=true;",
    "AzureWebJobsStorage": "UseDevelopmentStorage=true",
    # The local e-mail stand-in's connection string (localdev/email_http.py), at its usual port.
    "CommunicationServicesConnection": "endpoint=http://127.0.0.1:7075/;"
    "accesskey=bG9jYWwtY29tbXVuaWNhdGlvbi1zZXJ2aWNlcy1lbWFpbC1hY2Nlc3Mta2V5",
    # Where the API's URLs start, as make up sets it (never the request's Host header).
    "PUBLIC_BASE_URL": "http://localhost:7071",
    # The local emulator has nothing in flight: an archive run need not wait 2 s per queue for
    # stragglers before it takes a dead-letter sub-queue for empty.
    "DLQ_ARCHIVE_RECEIVE_WAIT_SECONDS": "0.5",
}


def app_settings(environ: Mapping[str, str] = APP_SETTINGS) -> Settings:
    """``Settings.from_env`` of the app with ``environ``'s pipelines (PIPELINE_MODULES too)."""
    return Settings.from_env(environ, pipelines=app_pipelines(environ).declared)


# When the builders' dead letters were enqueued.
NOW = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)


def order_document(**changes: Any) -> dict[str, Any]:
    """A valid order as POST /api/orders takes it (one line of SKU-1), with ``changes``."""
    return {
        "customer_email": "ada@example.com",
        "customer_name": "Ada",
        "card_token": "tok_visa",
        "currency": "EUR",
        "lines": [{"sku": "SKU-1", "quantity": 2}],
        **changes,
    }


_sequence_numbers = itertools.count(1000)


def dead_letter(
    message: TaskMessage,
    reason: str,
    *,
    queue: str,
    session_id: str,
    description: str | None = None,
    body: bytes | None = None,
    enqueued_time: datetime | None = NOW,
    delivery_count: int = 1,
    sequence_number: int | None = None,
    extra_properties: Mapping[str, Any] | None = None,
) -> DeadLetter:
    """``message`` as Service Bus hands it over from ``queue``'s dead-letter queue, with
    ``reason`` (and a ``description`` naming the step unless given): its body (or ``body``, for
    an unreadable one) and its application properties (plus ``extra_properties``, such as the
    trace context it was sent in), a fresh sequence number unless given."""
    return DeadLetter(
        queue=queue,
        session_id=session_id,
        sequence_number=next(_sequence_numbers) if sequence_number is None else sequence_number,
        message_id=message.message_id(),
        body=message.to_json() if body is None else body,
        content_type="application/json",
        application_properties={**message.application_properties(), **(extra_properties or {})},
        reason=reason,
        description=f"{reason} at step {message.step}" if description is None else description,
        enqueued_time=enqueued_time,
        delivery_count=delivery_count,
    )


def purchase_message(session: str, step: int) -> TaskMessage:
    """Step ``step`` of the purchase whose job and session are ``job-{session}`` and
    ``session`` (its payload names the step)."""
    return TaskMessage(
        job_id=f"job-{session}",
        pipeline=PURCHASE,
        task=PURCHASE_TASKS[step - 1],
        step=step,
        is_last=step == len(PURCHASE_TASKS),
        payload={"step": step},
    )


def purchase_dead_letter(
    session: str, step: int, reason: str, *, queue: str = "purchase-tasks"
) -> DeadLetter:
    """``purchase_message(session, step)``, dead-lettered from ``queue`` with ``reason``."""
    return dead_letter(purchase_message(session, step), reason, queue=queue, session_id=session)


def failed_purchase(
    session: str,
    *,
    from_step: int = 3,
    reason: str = "PaymentProviderUnavailable",
    upto: int = 5,
) -> list[DeadLetter]:
    """The dead letters of purchase ``session`` that failed at ``from_step`` with ``reason``:
    that step's message, then each later one up to ``upto`` as ``SessionFailed``."""
    return [purchase_dead_letter(session, from_step, reason)] + [
        purchase_dead_letter(session, step, "SessionFailed")
        for step in range(from_step + 1, upto + 1)
    ]
