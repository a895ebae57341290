"""``LocalHost``: runs every function of a FunctionApp with the Functions host's semantics."""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, Protocol

from .config import HostConfigurationError, HostOptions, connection_string
from .functions import (
    HTTP_TRIGGER,
    QUEUE_TRIGGER,
    SERVICE_BUS_TRIGGER,
    TIMER_TRIGGER,
    FunctionSpec,
    discover,
)
from .http import FunctionKeys, HttpFrontEnd
from .queues import QueueListener
from .servicebus import ServiceBusListener
from .settlement import SettlementRegistry, SettlementServer
from .timers import TimerListener

logger = logging.getLogger("localdev.host")

# Settings that hold the keys of HTTP functions (generated at start when not set).
MASTER_KEY_SETTING = "FUNCTIONS_MASTER_KEY"
HOST_KEY_SETTING = "FUNCTIONS_HOST_KEY"
FUNCTION_KEY_PREFIX = "FUNCTIONS_KEY_"  # FUNCTIONS_KEY_<function name>: that function's key


class _Listener(Protocol):
    def start(self) -> None: ...
    def stop(self, timeout: float) -> None: ...


class LocalHost:
    """Run ``app``'s functions: Service Bus (sessions or not), HTTP, timer and Storage queue
    triggers. ``settings`` are the app settings (%NAME% and connections resolve from them,
    falling back to ``os.environ``, and are in ``os.environ`` while the host runs, as the worker
    sees them); ``host_json`` is host.json as a dict.

    ``functions`` names the functions to run (all when None), like ``func start --functions``.
    ``start()`` starts every trigger and returns; ``stop()`` stops taking work, lets
    invocations in flight finish (up to ``drain_timeout`` seconds) and closes everything."""

    def __init__(
        self,
        app: Any,
        settings: Mapping[str, str] | None = None,
        host_json: Mapping[str, Any] | None = None,
        *,
        http_host: str = "127.0.0.1",
        http_port: int = 0,
        drain_timeout: float = 30.0,
        functions: Iterable[str] | None = None,
    ) -> None:
        self._given_settings = dict(settings or {})
        self._saved_environ: dict[str, str | None] = {}
        self.settings: dict[str, str] = {**os.environ, **self._given_settings}
        self.options = HostOptions.from_host_json(host_json or {})
        self.drain_timeout = drain_timeout
        only = None if functions is None else set(functions)
        self.functions: list[FunctionSpec] = discover(app, self.settings, only=only)
        self.function_keys = self._keys()
        self._settlement = SettlementServer(SettlementRegistry())
        self._listeners: list[_Listener] = []
        self._http: HttpFrontEnd | None = None
        self.timers: dict[str, TimerListener] = {}
        by_type: dict[str, list[FunctionSpec]] = {}
        for spec in self.functions:
            by_type.setdefault(spec.trigger_type, []).append(spec)
        unknown = set(by_type) - {SERVICE_BUS_TRIGGER, HTTP_TRIGGER, TIMER_TRIGGER, QUEUE_TRIGGER}
        if unknown:
            raise HostConfigurationError(
                f"The local host does not run these trigger types: {sorted(unknown)}"
            )
        if by_type.get(HTTP_TRIGGER):
            self._http = HttpFrontEnd(
                by_type[HTTP_TRIGGER],
                keys=self.function_keys,
                route_prefix=self.options.route_prefix,
                host=http_host,
                port=http_port,
            )
        self._by_type = by_type
        self._started = False

    @property
    def http_url(self) -> str:
        """``http://127.0.0.1:<port>`` (without the route prefix)."""
        if self._http is None:
            raise HostConfigurationError("The app has no HTTP functions.")
        return self._http.base_url

    @property
    def settlement_address(self) -> str:
        return self._settlement.address

    def start(self) -> LocalHost:
        # The worker sees the app settings as environment variables; so does the app here,
        # until stop() puts the environment back.
        self._saved_environ = {name: os.environ.get(name) for name in self._given_settings}
        os.environ.update(self._given_settings)
        self._settlement.start()
        try:
            for spec in self._by_type.get(SERVICE_BUS_TRIGGER, []):
                self._listeners.append(
                    ServiceBusListener(
                        spec,
                        connection_string=connection_string(
                            str(spec.setting("connection") or "ServiceBusConnection"),
                            self.settings,
                        ),
                        options=self.options.service_bus,
                        settlement=self._settlement,
                    )
                )
            for spec in self._by_type.get(QUEUE_TRIGGER, []):
                self._listeners.append(
                    QueueListener(
                        spec,
                        connection_string=connection_string(
                            str(spec.setting("connection") or "AzureWebJobsStorage"),
                            self.settings,
                        ),
                        options=self.options.queues,
                    )
                )
            for spec in self._by_type.get(TIMER_TRIGGER, []):
                timer = TimerListener(spec)
                self.timers[spec.name] = timer
                self._listeners.append(timer)
            if self._http is not None:
                self._listeners.append(self._http)
            for listener in self._listeners:
                listener.start()
        except BaseException:
            self.stop()
            raise
        self._started = True
        self._log_listing()
        return self

    def stop(self) -> None:
        """Stop every trigger (in-flight invocations finish, bounded), then settlement."""
        for listener in reversed(self._listeners):
            try:
                listener.stop(self.drain_timeout)
            except Exception:
                logger.exception("Stopping %r failed", listener)
        self._listeners.clear()
        self._settlement.stop()
        for name, value in self._saved_environ.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._saved_environ = {}
        self._started = False

    def __enter__(self) -> LocalHost:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _keys(self) -> FunctionKeys:
        master = self.settings.get(MASTER_KEY_SETTING) or secrets.token_urlsafe(32)
        host = self.settings.get(HOST_KEY_SETTING) or secrets.token_urlsafe(32)
        per_function = {
            spec.name: self.settings[FUNCTION_KEY_PREFIX + spec.name]
            for spec in self.functions
            if self.settings.get(FUNCTION_KEY_PREFIX + spec.name)
        }
        return FunctionKeys(master=master, host=host, functions=per_function)

    def _log_listing(self) -> None:
        lines = ["", "Functions:", ""]
        for spec in self.functions:
            if spec.trigger_type == HTTP_TRIGGER and self._http is not None:
                route = next(r for r in self._http.routes if r.spec is spec)
                methods = ",".join(sorted(route.methods)) if route.methods else "ALL"
                lines.append(f"        {spec.name}: [{methods}] {self._http.url_of(route)}")
            else:
                detail = {
                    SERVICE_BUS_TRIGGER: lambda s: (
                        f"queue {s.setting('queueName')}"
                        + (" (sessions)" if s.setting("isSessionsEnabled") else "")
                    ),
                    QUEUE_TRIGGER: lambda s: f"storage queue {s.setting('queueName')}",
                    TIMER_TRIGGER: lambda s: f"schedule {s.setting('schedule')}",
                }[spec.trigger_type](spec)
                lines.append(f"        {spec.name}: {spec.trigger_type} ({detail})")
        logger.info("\n".join(lines))
