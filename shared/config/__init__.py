"""One frozen settings object, built from the environment (app settings in Azure, the
``Values`` of local.settings.json locally). A missing required setting fails at once, by name.

Connections follow the Functions conventions: ``<NAME>`` holds a connection string, or
``<NAME>__fullyQualifiedNamespace`` / ``<NAME>__accountName`` (plus the optional
``<NAME>__clientId`` of a user-assigned managed identity) select an identity-based connection
(``connections``); each value is read and checked by ``reader``.

Telemetry's settings (``APPLICATIONINSIGHTS_*``, ``OTEL_*``) are not here: telemetry is decided
per process before any ``Settings`` exists, from the environment as the Functions worker and
the OpenTelemetry specification read it, in one place, ``shared.telemetry.setup``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from urllib.parse import urlsplit

from ..domain.alerts import AlertRules
from ..domain.pipelines import Pipeline
from ..domain.retention import Lifetimes
from ..domain.retries import DEFAULT_CIRCUIT_THRESHOLD, DEFAULT_HOLD_SECONDS, RetryPolicy
from ..domain.roles import ConsoleAccessSettings, Role, role_named
from .connections import (
    EMAIL_CONNECTION,
    SERVICE_BUS_CONNECTION,
    STORAGE_CONNECTION,
    EmailServiceConnectionSettings,
    ServiceBusConnectionSettings,
    StorageConnectionSettings,
    service_bus_connection,
    storage_connection,
)
from .reader import ConfigurationError, SettingsReader

__all__ = [
    "EMAIL_CONNECTION",
    "SERVICE_BUS_CONNECTION",
    "STORAGE_CONNECTION",
    "ConfigurationError",
    "ConsoleAccessSettings",
    "EmailServiceConnectionSettings",
    "ServiceBusConnectionSettings",
    "Settings",
    "StorageConnectionSettings",
    "console_access",
    "pipeline_modules",
    "service_bus_connection",
    "storage_connection",
]

EMAIL_SENDERS = ("acs", "smtp")
# The Functions host's keys, as the local host reads them; App Service sets WEBSITE_AUTH_ENABLED
# when App Service Authentication (Easy Auth) fronts the app.
CONSOLE_KEY_SETTINGS = ("FUNCTIONS_HOST_KEY", "FUNCTIONS_MASTER_KEY")
EASY_AUTH_SETTING = "WEBSITE_AUTH_ENABLED"
# Modules of pipelines kept outside the app (comma-separated), added to the app's list.
PIPELINE_MODULES_SETTING = "PIPELINE_MODULES"


@dataclass(frozen=True)
class Settings:
    # pipeline name -> its session queue, from each declared pipeline's queue setting
    queues: Mapping[str, str]
    service_bus: ServiceBusConnectionSettings
    storage: StorageConnectionSettings
    tax_rate: Decimal
    shipping_fee: Decimal
    smtp_host: str
    smtp_port: int
    smtp_username: str | None
    smtp_password: str | None
    smtp_starttls: bool
    receipt_email_from: str
    payment_decline_tokens: frozenset[str]
    payment_outage_tokens: frozenset[str]
    # Overrides of every pipeline's declared retry window and backoffs (None: as declared).
    task_retry_window_seconds: float | None
    task_retry_min_backoff_seconds: float | None
    task_retry_max_backoff_seconds: float | None
    # How long one invocation may hold its session while it waits (below functionTimeout).
    task_hold_seconds: float
    # Transient failures in a row (from two sessions or more) that open a pipeline's circuit.
    circuit_threshold: int
    replay_queue_name: str
    archive_max_messages: int
    archive_max_seconds: float
    archive_receive_wait_seconds: float
    # host.json's extensions.queues.maxDequeueCount, which the app cannot read from the host:
    # after that many attempts a bulk replay's queue message goes to the poison queue.
    replay_max_dequeue_count: int
    # 0: gapless order numbers from one counter; N: blocks of N reserved per instance.
    order_number_block_size: int = 0
    console: ConsoleAccessSettings = field(default_factory=ConsoleAccessSettings)
    # Where the API's absolute URLs start (``https://<app>.azurewebsites.net``); None: the
    # API answers with paths alone. Never taken from a request's Host header.
    public_base_url: str | None = None
    retention: Lifetimes = field(default_factory=Lifetimes)
    purge_max_seconds: float = 240.0
    alerts: AlertRules = field(default_factory=AlertRules)
    # Which adapter sends e-mail: "acs" (Azure Communication Services Email) or "smtp".
    email_sender: str = "acs"
    email_service: EmailServiceConnectionSettings = field(
        default_factory=EmailServiceConnectionSettings
    )
    # Also record each order's end as a step row, which releases before this one read its
    # status from: on while their instances run beside this one's during a deploy.
    order_step_rows: bool = False
    # A fault-injection point for the crash tests, off unless set: a folder in which an
    # instance that finds its process armed holds each receipt after sending it and before
    # anything records it (shared.bootstrap.faults).
    fault_hold_after_receipt_sent: str | None = None

    def queue_of(self, pipeline: str) -> str:
        """The session queue of a declared pipeline."""
        return self.queues[pipeline]

    def retry(self, declared: RetryPolicy) -> RetryPolicy:
        """A pipeline's declared retry policy with the settings' overrides."""
        window, low, high = (
            self.task_retry_window_seconds,
            self.task_retry_min_backoff_seconds,
            self.task_retry_max_backoff_seconds,
        )
        return RetryPolicy(
            window=declared.window if window is None else window,
            min_backoff=declared.min_backoff if low is None else low,
            max_backoff=declared.max_backoff if high is None else high,
        )

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, *, pipelines: Iterable[Pipeline]
    ) -> Settings:
        """The settings of an app running ``pipelines`` (each one's queue setting is
        required)."""
        environ = os.environ if environ is None else environ
        env = SettingsReader(environ)
        return cls(
            queues={p.name: env.required(p.queue_setting) for p in pipelines},
            service_bus=service_bus_connection(environ=environ),
            storage=storage_connection(environ=environ),
            tax_rate=env.decimal("ORDER_TAX_RATE", "0.25"),
            shipping_fee=env.decimal("ORDER_SHIPPING_FEE", "4.95"),
            smtp_host=env.optional("SMTP_HOST") or "localhost",
            smtp_port=env.integer("SMTP_PORT", 25),
            smtp_username=env.optional("SMTP_USERNAME"),
            smtp_password=env.optional("SMTP_PASSWORD"),
            smtp_starttls=env.boolean("SMTP_STARTTLS", False),
            receipt_email_from=env.optional("RECEIPT_EMAIL_FROM") or "receipts@shop.example",
            payment_decline_tokens=env.token_set("PAYMENT_SIMULATOR_DECLINE_TOKENS"),
            payment_outage_tokens=env.token_set("PAYMENT_SIMULATOR_OUTAGE_TOKENS"),
            task_retry_window_seconds=env.seconds("TASK_RETRY_WINDOW_SECONDS"),
            task_retry_min_backoff_seconds=env.seconds("TASK_RETRY_MIN_BACKOFF_SECONDS"),
            task_retry_max_backoff_seconds=env.seconds("TASK_RETRY_MAX_BACKOFF_SECONDS"),
            task_hold_seconds=env.seconds("TASK_HOLD_SECONDS") or DEFAULT_HOLD_SECONDS,
            circuit_threshold=_circuit_threshold(env),
            replay_queue_name=env.required("REPLAY_QUEUE_NAME"),
            archive_max_messages=env.integer("DLQ_ARCHIVE_MAX_MESSAGES", 2000),
            archive_max_seconds=env.number("DLQ_ARCHIVE_MAX_SECONDS", 240.0),
            archive_receive_wait_seconds=env.number("DLQ_ARCHIVE_RECEIVE_WAIT_SECONDS", 2.0),
            replay_max_dequeue_count=env.integer("REPLAY_MAX_DEQUEUE_COUNT", 5),
            order_number_block_size=_block_size(env),
            console=console_access(environ),
            email_sender=_email_sender(env),
            email_service=EmailServiceConnectionSettings(
                connection_string=env.optional(EMAIL_CONNECTION),
                endpoint=env.optional(f"{EMAIL_CONNECTION}__endpoint"),
                client_id=env.optional(f"{EMAIL_CONNECTION}__clientId"),
            ),
            fault_hold_after_receipt_sent=env.optional("FAULT_HOLD_AFTER_RECEIPT_SENT"),
            order_step_rows=env.boolean("ORDER_STEP_ROWS", False),
            public_base_url=_public_base(env),
            retention=_lifetimes(env),
            purge_max_seconds=env.number("PURGE_MAX_SECONDS", 240.0),
            alerts=AlertRules(
                dead_letter_wait_seconds=env.number("ALERT_DEAD_LETTER_WAIT_SECONDS", 900.0),
                failed_sessions_threshold=env.integer("ALERT_FAILED_SESSIONS_THRESHOLD", 10),
                failed_sessions_window_minutes=env.number(
                    "ALERT_FAILED_SESSIONS_WINDOW_MINUTES", 15.0
                ),
            ),
        )


def pipeline_modules(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The modules ``PIPELINE_MODULES`` names: pipelines kept outside the app
    (``shared.bootstrap.declared``)."""
    value = SettingsReader(os.environ if environ is None else environ).optional(
        PIPELINE_MODULES_SETTING
    )
    return tuple(name.strip() for name in (value or "").split(",") if name.strip())


def console_access(environ: Mapping[str, str] | None = None) -> ConsoleAccessSettings:
    """The console's and the operator API's access rule from the app settings (see
    ``ConsoleAccessSettings``). ``KEY_ROLES``: ``<role>=<SHA-256 hex of a key>`` pairs,
    separated by commas; ``DEFAULT_KEY_ROLE``: a role, or ``none``."""
    env = SettingsReader(os.environ if environ is None else environ)
    keys = frozenset(key for name in CONSOLE_KEY_SETTINGS if (key := env.optional(name)))
    default = env.optional("DEFAULT_KEY_ROLE") or Role.EDITOR.label
    return ConsoleAccessSettings(
        keys=keys,
        easy_auth=env.boolean(EASY_AUTH_SETTING, False),
        key_roles=_key_roles(env.optional("KEY_ROLES") or ""),
        default_key_role=None if default.lower() == "none" else _role("DEFAULT_KEY_ROLE", default),
    )


_DIGEST = re.compile(r"[0-9a-f]{64}")


def _key_roles(value: str) -> dict[str, Role]:
    roles: dict[str, Role] = {}
    for pair in filter(None, (p.strip() for p in value.split(","))):
        name, _, digest = pair.partition("=")
        digest = digest.strip().lower()
        if not _DIGEST.fullmatch(digest):
            raise ConfigurationError(
                f"KEY_ROLES: {pair!r} is not <role>=<SHA-256 of the key, 64 hex digits>"
            )
        roles[digest] = _role("KEY_ROLES", name)
    return roles


def _role(setting: str, name: str) -> Role:
    try:
        return role_named(name)
    except ValueError as error:
        raise ConfigurationError(f"{setting}: {error}") from None


def _public_base(env: SettingsReader) -> str | None:
    value = env.optional("PUBLIC_BASE_URL")
    if value is None:
        return None
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise ConfigurationError(
            f"PUBLIC_BASE_URL must be an http(s) URL without a query, got {value!r}"
        )
    return value.rstrip("/")


def _lifetimes(env: SettingsReader) -> Lifetimes:
    """The ``RETENTION_*_DAYS`` settings (0: kept for good); defaults in ``Lifetimes``."""
    d = Lifetimes()
    return Lifetimes(
        idempotency_keys=env.number("RETENTION_IDEMPOTENCY_KEYS_DAYS", d.idempotency_keys),
        confirmations=env.number("RETENTION_CONFIRMATIONS_DAYS", d.confirmations),
        replayed_sessions=env.number("RETENTION_REPLAYED_SESSIONS_DAYS", d.replayed_sessions),
        resolved_sessions=env.number("RETENTION_RESOLVED_SESSIONS_DAYS", d.resolved_sessions),
        jobs=env.number("RETENTION_JOBS_DAYS", d.jobs),
        replay_requests=env.number("RETENTION_REPLAY_REQUESTS_DAYS", d.replay_requests),
        audit=env.number("RETENTION_AUDIT_DAYS", d.audit),
    )


def _email_sender(env: SettingsReader) -> str:
    sender = (env.optional("EMAIL_SENDER") or "acs").lower()
    if sender not in EMAIL_SENDERS:
        raise ConfigurationError(
            f"EMAIL_SENDER must be {' or '.join(EMAIL_SENDERS)}, got {sender!r}"
        )
    return sender


def _block_size(env: SettingsReader) -> int:
    size = env.integer("ORDER_NUMBER_BLOCK_SIZE", 0)
    if size == 1 or size < 0:
        raise ConfigurationError(
            f"ORDER_NUMBER_BLOCK_SIZE must be 0 (gapless numbers) or at least 2, got {size}"
        )
    return size


def _circuit_threshold(env: SettingsReader) -> int:
    threshold = env.integer("PIPELINE_CIRCUIT_THRESHOLD", DEFAULT_CIRCUIT_THRESHOLD)
    if threshold < 1:
        raise ConfigurationError(f"PIPELINE_CIRCUIT_THRESHOLD must be at least 1, got {threshold}")
    return threshold
