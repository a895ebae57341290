"""Settings and host.json for the local host, read the way the Functions host reads them.

``load_settings`` returns local.settings.json's ``Values`` (falling back to the committed
``.example``); ``apply_settings`` copies them into ``os.environ`` without overriding what is
already set, like ``func start``. ``HostOptions`` holds the host.json values the triggers use.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger("functions_local_host")

# What ``UseDevelopmentStorage=true`` stands for: Azurite on its default ports, with the
# well-known development account that every Azurite and the Storage Emulator accept.
_AZURITE_ACCOUNT = "devstoreaccount1"
_AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
AZURITE_CONNECTION_STRING = (
    f"DefaultEndpointsProtocol=http;AccountName={_AZURITE_ACCOUNT};AccountKey={_AZURITE_KEY};"
    f"BlobEndpoint=http://127.0.0.1:10000/{_AZURITE_ACCOUNT};"
    f"QueueEndpoint=http://127.0.0.1:10001/{_AZURITE_ACCOUNT};"
    f"TableEndpoint=http://127.0.0.1:10002/{_AZURITE_ACCOUNT}"
)

_SETTING_REF = re.compile(r"%([^%]+)%")
_TIMESPAN = re.compile(r"^(?:(\d+)\.)?(\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d+))?$")


class HostConfigurationError(RuntimeError):
    """A setting, connection or host.json value the host cannot use; the message names it."""


def load_settings(path: Path) -> dict[str, str]:
    """The ``Values`` of local.settings.json at ``path``, or of ``<path>.example`` when the file
    is absent. Raises ``HostConfigurationError`` when neither exists or the JSON is bad."""
    for candidate in (path, path.with_name(path.name + ".example")):
        if candidate.exists():
            try:
                document = json.loads(candidate.read_text())
            except ValueError as error:
                raise HostConfigurationError(f"{candidate} is not valid JSON: {error}") from error
            if candidate != path:
                logger.warning("%s is absent: using %s", path.name, candidate.name)
            values = document.get("Values", {})
            return {
                str(name): "" if value is None else str(value) for name, value in values.items()
            }
    raise HostConfigurationError(f"Neither {path} nor {path}.example exists.")


def apply_settings(
    settings: Mapping[str, str], environ: MutableMapping[str, str] | None = None
) -> None:
    """Copy settings into the environment; a variable that is already set wins (as in func)."""
    env = os.environ if environ is None else environ
    for name, value in settings.items():
        env.setdefault(name, value)


def load_host_json(path: Path) -> dict[str, Any]:
    if not path.exists():
        logger.warning("%s is absent: using the host's defaults", path)
        return {"version": "2.0"}
    try:
        return dict(json.loads(path.read_text()))
    except ValueError as error:
        raise HostConfigurationError(f"{path} is not valid JSON: {error}") from error


def resolve(value: str, environ: Mapping[str, str]) -> str:
    """Replace every %NAME% by the app setting NAME; a missing one fails by name."""

    def setting(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise HostConfigurationError(
                f"The binding refers to %{name}% but the app setting {name} is not set."
            )
        return environ[name]

    return _SETTING_REF.sub(setting, value)


def connection_string(name: str, environ: Mapping[str, str]) -> str:
    """The connection string of a binding's ``connection`` (the setting itself, or
    ``ConnectionStrings:<name>`` style ``<name>__connectionString``). Identity-based
    connections (``<name>__fullyQualifiedNamespace``) need Azure and are refused locally."""
    for candidate in (name, f"{name}__connectionString", f"AzureWebJobs{name}"):
        value = environ.get(candidate, "").strip()
        if value:
            if value.rstrip(";").replace(" ", "").lower() == "usedevelopmentstorage=true":
                return AZURITE_CONNECTION_STRING
            return value
    raise HostConfigurationError(
        f"The connection {name!r} has no connection string: set the app setting {name} "
        "(the local host does not do identity-based connections)."
    )


def timespan(value: Any, default: float) -> float:
    """Seconds of a host.json TimeSpan ("00:05:00", "1.00:00:00") or a number of seconds."""
    if value is None:
        return default
    if isinstance(value, int | float):
        return float(value)
    match = _TIMESPAN.match(str(value).strip())
    if not match:
        raise HostConfigurationError(f"{value!r} is not a TimeSpan like 00:05:00")
    days, hours, minutes, seconds, fraction = match.groups()
    total = int(days or 0) * 86400 + int(hours) * 3600 + int(minutes) * 60 + int(seconds)
    return total + (float(f"0.{fraction}") if fraction else 0.0)


DEFAULT_FUNCTION_TIMEOUT = 1800.0


@dataclass(frozen=True)
class ServiceBusOptions:
    """host.json's ``extensions.serviceBus`` (extension 5.x names, in seconds where a TimeSpan),
    with the extension's defaults."""

    max_concurrent_sessions: int = 8
    max_concurrent_calls: int = 16
    session_idle_timeout: float = 60.0
    max_auto_lock_renewal_duration: float = 300.0
    auto_complete_messages: bool = True
    # Batch triggers (cardinality "many"), as the extension's ServiceBusOptions.
    max_message_batch_size: int = 1000
    min_message_batch_size: int = 1
    max_batch_wait_time: float = 30.0


@dataclass(frozen=True)
class QueueOptions:
    """host.json's ``extensions.queues``, with the extension's defaults."""

    batch_size: int = 16
    new_batch_threshold: int | None = None
    visibility_timeout: float = 0.0
    max_dequeue_count: int = 5
    max_polling_interval: float = 60.0
    message_encoding: str = "base64"


@dataclass(frozen=True)
class SingletonOptions:
    """host.json's ``singleton`` section (the WebJobs SDK's ``SingletonOptions``): how long a
    listener's lock lease lasts and how often an instance without it tries to take it."""

    listener_lock_period: float = 60.0
    listener_lock_recovery_polling_interval: float = 60.0


@dataclass(frozen=True)
class HostOptions:
    route_prefix: str = "api"
    service_bus: ServiceBusOptions = ServiceBusOptions()
    queues: QueueOptions = QueueOptions()
    singleton: SingletonOptions = SingletonOptions()
    # host.json's functionTimeout in seconds; None: unbounded ("-1").
    function_timeout: float | None = DEFAULT_FUNCTION_TIMEOUT

    @classmethod
    def from_host_json(cls, document: Mapping[str, Any]) -> HostOptions:
        extensions = document.get("extensions") or {}
        http = extensions.get("http") or {}
        return cls(
            route_prefix=str(http.get("routePrefix", "api")).strip("/"),
            service_bus=_service_bus_options(extensions.get("serviceBus") or {}),
            queues=_queue_options(extensions.get("queues") or {}),
            singleton=_singleton_options(document.get("singleton") or {}),
            function_timeout=_function_timeout(document.get("functionTimeout")),
        )


def _function_timeout(value: Any) -> float | None:
    """host.json's ``functionTimeout``: absent, the default of the Flex Consumption, Premium
    and Dedicated plans (30 minutes); "-1", unbounded (learn.microsoft.com, host.json
    reference, functionTimeout)."""
    if value is None:
        return DEFAULT_FUNCTION_TIMEOUT
    if str(value).strip() == "-1":
        return None
    seconds = timespan(value, DEFAULT_FUNCTION_TIMEOUT)
    if seconds <= 0:
        raise HostConfigurationError(f"host.json: functionTimeout {value!r} is not positive")
    return seconds


def _service_bus_options(section: Mapping[str, Any]) -> ServiceBusOptions:
    # Service Bus extension 5.x (bundle 4.x) reads flat keys; 2.x-4.x read them from
    # messageHandlerOptions / sessionHandlerOptions. The flat key wins when both are given.
    sessions = section.get("sessionHandlerOptions") or {}
    messages = section.get("messageHandlerOptions") or {}
    defaults = ServiceBusOptions()

    def pick(flat: str, nested: Mapping[str, Any], legacy: str) -> Any:
        if flat in section:
            return section[flat]
        if legacy in nested:
            logger.warning(
                "host.json: serviceBus.%s is the 4.x layout; extension 5.x reads serviceBus.%s",
                legacy,
                flat,
            )
            return nested[legacy]
        return None

    auto_complete = pick("autoCompleteMessages", sessions, "autoComplete")
    if auto_complete is None:
        auto_complete = messages.get("autoComplete")
    renewal = pick("maxAutoLockRenewalDuration", sessions, "maxAutoRenewDuration")
    if renewal is None:
        renewal = messages.get("maxAutoRenewDuration")
    concurrent_sessions = pick("maxConcurrentSessions", sessions, "maxConcurrentSessions")
    concurrent_calls = pick("maxConcurrentCalls", messages, "maxConcurrentCalls")
    idle = pick("sessionIdleTimeout", sessions, "messageWaitTimeout")
    max_batch = int(section.get("maxMessageBatchSize", defaults.max_message_batch_size))
    min_batch = int(section.get("minMessageBatchSize", defaults.min_message_batch_size))
    batch_wait = timespan(section.get("maxBatchWaitTime"), defaults.max_batch_wait_time)
    # The extension's own checks (ServiceBusWebJobsBuilderExtensions).
    if min_batch > max_batch:
        raise HostConfigurationError(
            "host.json: serviceBus.minMessageBatchSize must not be above maxMessageBatchSize"
        )
    if batch_wait > 150:
        raise HostConfigurationError("host.json: serviceBus.maxBatchWaitTime is at most 00:02:30")
    return ServiceBusOptions(
        max_concurrent_sessions=int(concurrent_sessions or defaults.max_concurrent_sessions),
        max_concurrent_calls=int(concurrent_calls or defaults.max_concurrent_calls),
        session_idle_timeout=timespan(idle, defaults.session_idle_timeout),
        max_auto_lock_renewal_duration=timespan(renewal, defaults.max_auto_lock_renewal_duration),
        auto_complete_messages=defaults.auto_complete_messages
        if auto_complete is None
        else bool(auto_complete),
        max_message_batch_size=max_batch,
        min_message_batch_size=min_batch,
        max_batch_wait_time=batch_wait,
    )


def _singleton_options(section: Mapping[str, Any]) -> SingletonOptions:
    defaults = SingletonOptions()
    period = timespan(section.get("listenerLockPeriod"), defaults.listener_lock_period)
    if not 15 <= period <= 60:
        # A blob lease lasts 15 to 60 seconds; the SDK refuses other periods too.
        raise HostConfigurationError(
            f"host.json: singleton.listenerLockPeriod must be 00:00:15 to 00:01:00, not {period} s"
        )
    return SingletonOptions(
        listener_lock_period=period,
        listener_lock_recovery_polling_interval=timespan(
            section.get("listenerLockRecoveryPollingInterval"),
            defaults.listener_lock_recovery_polling_interval,
        ),
    )


def _queue_options(section: Mapping[str, Any]) -> QueueOptions:
    defaults = QueueOptions()
    batch_size = int(section.get("batchSize", defaults.batch_size))
    threshold = section.get("newBatchThreshold")
    return QueueOptions(
        batch_size=batch_size,
        new_batch_threshold=None if threshold is None else int(threshold),
        visibility_timeout=timespan(section.get("visibilityTimeout"), 0.0),
        max_dequeue_count=int(section.get("maxDequeueCount", defaults.max_dequeue_count)),
        max_polling_interval=timespan(
            section.get("maxPollingInterval"), defaults.max_polling_interval
        ),
        message_encoding=str(section.get("messageEncoding", "base64")).lower(),
    )
