"""``LocalHost``: runs a function app through Microsoft's Python worker, with the Functions
host's semantics for its triggers."""

from __future__ import annotations

import logging
import os
import secrets
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from . import worker as worker_process
from .config import HostConfigurationError, HostOptions, connection_string
from .functions import (
    HTTP_TRIGGER,
    QUEUE_TRIGGER,
    SERVICE_BUS_TRIGGER,
    TIMER_TRIGGER,
    FunctionSpec,
    discover,
)
from .http import DEFAULT_BODY_LIMIT, DEFAULT_READ_TIMEOUT, FunctionKeys, HttpFrontEnd
from .http_server import KEEP_ALIVE_TIMEOUT
from .queues import QueueListener
from .runtime_rules import (
    AZURE_INSTANCE_CPUS,
    THREAD_COUNT_SETTING,
    azure_default_thread_count,
    check_runtime_pin,
)
from .schedule_monitor import ScheduleMonitor
from .servicebus import ServiceBusListener
from .servicebus_binding import check_supported
from .settlement import SettlementRegistry, SettlementServer
from .singleton import ListenerLock, host_id, listener_lock_id
from .timers import TimerListener
from .worker import SCRIPT_FILE_SETTING, Worker, point_settlement_client
from .worker_channel import HOST_VERSION, EventStreams
from .worker_pool import WorkerPool, worker_process_count

logger = logging.getLogger("functions_local_host")

# Settings that hold the keys of HTTP functions (generated at start when not set).
MASTER_KEY_SETTING = "FUNCTIONS_MASTER_KEY"
HOST_KEY_SETTING = "FUNCTIONS_HOST_KEY"
FUNCTION_KEY_PREFIX = "FUNCTIONS_KEY_"  # FUNCTIONS_KEY_<function name>: that function's key
# "true": the worker runs in processes of its own (FUNCTIONS_WORKER_PROCESS_COUNT of them, 1 by
# default, as in Azure), over the host's gRPC server; else in the host's process.
WORKER_PROCESSES_SETTING = "LOCALDEV_WORKER_PROCESSES"
# The Functions host's setting for the largest request body, in bytes.
BODY_LIMIT_SETTING = "FUNCTIONS_REQUEST_BODY_SIZE_LIMIT"
_TRIGGERS = {SERVICE_BUS_TRIGGER, HTTP_TRIGGER, TIMER_TRIGGER, QUEUE_TRIGGER}


class _Listener(Protocol):
    def start(self) -> None: ...
    def stop(self, timeout: float) -> None: ...


class LocalHost:
    """Run the app whose script is ``app`` (``function_app.py``; its folder is the script root)
    through Microsoft's Python worker (``worker.py``): Service Bus (sessions or not), HTTP,
    timer and Storage queue triggers. ``settings`` are the app settings (%NAME% and connections
    resolve from them, falling back to ``os.environ``, and they are the worker's environment
    while the host runs); ``host_json`` is host.json as a dict.

    ``functions`` names the functions to run (all when None), like ``func start --functions``.
    ``start()`` indexes the app in the worker, starts every trigger and returns; ``stop()`` stops
    taking work, lets invocations in flight finish (up to ``drain_timeout`` seconds) and closes
    everything. One host runs in a process at a time (the worker holds one app per process).

    ``http_read_timeout`` bounds how long a request's headers (from its first byte) and its
    body (from the end of the headers) may take to arrive (Kestrel's RequestHeadersTimeout,
    30 s); ``http_keep_alive_timeout`` how long a connection may wait for its next request
    (Kestrel's KeepAliveTimeout, 130 s); ``http_max_connections`` how many connections may be
    open at once (``http_server.py``).

    As in Azure (``runtime_rules.py``): an app whose ``requirements.txt`` pins another
    ``azure-functions-runtime`` than the installed one is refused, and with
    ``PYTHON_THREADPOOL_THREAD_COUNT`` unset the worker gets the thread pool Azure would give it
    on an instance of ``instance_cpus`` vCPUs, not one sized from this machine's CPUs.

    ``worker_processes``: run the worker in processes of its own, as the Functions host does
    (``worker_pool.py``; FUNCTIONS_WORKER_PROCESS_COUNT of them); None reads
    LOCALDEV_WORKER_PROCESSES from the settings (default: in this process)."""

    def __init__(
        self,
        app: str | os.PathLike[str],
        settings: Mapping[str, str] | None = None,
        host_json: Mapping[str, Any] | None = None,
        *,
        http_host: str = "127.0.0.1",
        http_port: int = 0,
        drain_timeout: float = 30.0,
        functions: Iterable[str] | None = None,
        http_read_timeout: float = DEFAULT_READ_TIMEOUT,
        http_keep_alive_timeout: float = KEEP_ALIVE_TIMEOUT,
        http_max_connections: int | None = None,
        instance_cpus: int = AZURE_INSTANCE_CPUS,
        worker_processes: bool | None = None,
    ) -> None:
        self.script = Path(app).resolve()
        if not self.script.is_file():
            raise HostConfigurationError(f"The app's script {self.script} does not exist.")
        self._given_settings = {**dict(settings or {}), SCRIPT_FILE_SETTING: self.script.name}
        if (
            THREAD_COUNT_SETTING not in self._given_settings
            and THREAD_COUNT_SETTING not in os.environ
        ):
            self._given_settings[THREAD_COUNT_SETTING] = str(
                azure_default_thread_count(instance_cpus)
            )
        self._saved_environ: dict[str, str | None] = {}
        self._saved_cwd: str | None = None
        self.settings: dict[str, str] = {**os.environ, **self._given_settings}
        self.options = HostOptions.from_host_json(host_json or {})
        self.drain_timeout = drain_timeout
        self._only = None if functions is None else set(functions)
        self._http_host = http_host
        self._http_port = http_port
        self._http_read_timeout = http_read_timeout
        self._http_keep_alive_timeout = http_keep_alive_timeout
        self._http_max_connections = http_max_connections
        self.functions: list[FunctionSpec] = []
        # Used for the master and host keys that the settings leave unset.
        self._generated_keys = (secrets.token_urlsafe(32), secrets.token_urlsafe(32))
        self.function_keys = self._keys()
        if worker_processes is None:
            flag = self.settings.get(WORKER_PROCESSES_SETTING, "").strip().lower()
            worker_processes = flag in ("1", "true", "yes")
        self.worker_processes = worker_processes
        self._streams = EventStreams()
        self._settlement = SettlementServer(
            SettlementRegistry(), handlers=[self._streams.handler()] if worker_processes else []
        )
        self._listeners: list[_Listener] = []
        self._http: HttpFrontEnd | None = None
        self._worker: Worker | WorkerPool | None = None
        self.timers: dict[str, TimerListener] = {}
        self._started = False
        self._started_at = 0.0

    @property
    def http_url(self) -> str:
        """``http://127.0.0.1:<port>`` (without the route prefix)."""
        if self._http is None:
            raise HostConfigurationError("The app has no HTTP functions (or the host is stopped).")
        return self._http.base_url

    @property
    def settlement_address(self) -> str:
        return self._settlement.address

    def start(self) -> LocalHost:
        check_runtime_pin(self.script.parent)
        # The app settings are the worker's environment, until stop() puts it back.
        self._saved_environ = {name: os.environ.get(name) for name in self._given_settings}
        self._saved_cwd = os.getcwd()
        os.environ.update(self._given_settings)
        try:
            worker: Worker | WorkerPool
            if self.worker_processes:
                # The worker processes connect to the server: it runs before they start.
                self._settlement.start()
                worker = WorkerPool(
                    worker_process_count(self.settings),
                    self._streams,
                    self._settlement.address,
                    function_timeout=self.options.function_timeout,
                )
            else:
                worker = worker_process.acquire(self)
                worker.function_timeout = self.options.function_timeout
            self._worker = worker
            indexed = worker.index(self.script, dict(os.environ))
            self.functions = discover(indexed, self.settings, worker=worker, only=self._only)
            by_type = self._by_type()
            worker.load(spec.metadata for spec in self.functions)
            self.function_keys = self._keys()
            if not self.worker_processes:
                self._settlement.start()
                point_settlement_client(self._settlement.address)
            self._create_listeners(by_type)
            for listener in self._listeners:
                listener.start()
        except BaseException:
            self.stop()
            raise
        self._started = True
        self._started_at = time.monotonic()
        self._log_listing()
        return self

    def health(self) -> dict[str, Any]:
        """The host's status, as the Functions host's ``GET /admin/host/status`` answers it
        (``id``, ``state``, ``version``, ``processUptime`` in ms, ``errors``), plus
        ``workers``: each worker process's state (``running`` or ``restarting``), pid, restarts
        and last exit. ``errors`` names every worker that is restarting now."""
        workers = self._worker.health() if isinstance(self._worker, WorkerPool) else []
        errors = [
            f"Worker process {w['number']} exited (exit code {w['lastExit']['exitCode']}, "
            f"{w['lastExit']['reason']}) and is restarting."
            for w in workers
            if w["state"] != "running" and w["lastExit"]
        ]
        return {
            "id": host_id(self.settings, self.script),
            "state": "Running" if self._started else "Stopped",
            "version": HOST_VERSION,
            "processUptime": int((time.monotonic() - self._started_at) * 1000)
            if self._started
            else 0,
            "errors": errors,
            "workerProcesses": self.worker_processes,
            "workers": workers,
        }

    def _by_type(self) -> dict[str, list[FunctionSpec]]:
        by_type: dict[str, list[FunctionSpec]] = {}
        for spec in self.functions:
            by_type.setdefault(spec.trigger_type, []).append(spec)
        unknown = set(by_type) - _TRIGGERS
        if unknown:
            raise HostConfigurationError(
                f"The local host does not run these trigger types: {sorted(unknown)}"
            )
        for spec in by_type.get(SERVICE_BUS_TRIGGER, []):
            check_supported(spec)
        return by_type

    def _connection_string(self, spec: FunctionSpec, default_setting: str) -> str:
        """The connection string the trigger's ``connection`` (or ``default_setting``) names."""
        return connection_string(str(spec.setting("connection") or default_setting), self.settings)

    def _create_listeners(self, by_type: Mapping[str, list[FunctionSpec]]) -> None:
        for spec in by_type.get(SERVICE_BUS_TRIGGER, []):
            self._listeners.append(
                ServiceBusListener(
                    spec,
                    connection_string=self._connection_string(spec, "ServiceBusConnection"),
                    options=self.options.service_bus,
                    settlement=self._settlement,
                )
            )
        for spec in by_type.get(QUEUE_TRIGGER, []):
            self._listeners.append(
                QueueListener(
                    spec,
                    connection_string=self._connection_string(spec, "AzureWebJobsStorage"),
                    options=self.options.queues,
                )
            )
        for spec in by_type.get(TIMER_TRIGGER, []):
            timer = TimerListener(spec, self._listener_lock(spec), self._schedule_monitor(spec))
            self.timers[spec.name] = timer
            self._listeners.append(timer)
        if by_type.get(HTTP_TRIGGER):
            self._http = HttpFrontEnd(
                by_type[HTTP_TRIGGER],
                keys=self.function_keys,
                route_prefix=self.options.route_prefix,
                host=self._http_host,
                port=self._http_port,
                body_limit=int(self.settings.get(BODY_LIMIT_SETTING) or DEFAULT_BODY_LIMIT),
                read_timeout=self._http_read_timeout,
                keep_alive_timeout=self._http_keep_alive_timeout,
                max_connections=self._http_max_connections,
                status=self.health,
            )
            self._listeners.append(self._http)

    def _schedule_monitor(self, spec: FunctionSpec) -> ScheduleMonitor | None:
        """The timer's schedule status in AzureWebJobsStorage (None without that setting)."""
        try:
            storage = connection_string("AzureWebJobsStorage", self.settings)
        except HostConfigurationError:
            return None
        return ScheduleMonitor(
            storage, host_id(self.settings, self.script), f"Host.Functions.{spec.name}"
        )

    def _listener_lock(self, spec: FunctionSpec) -> ListenerLock | None:
        """The listener's singleton lock in AzureWebJobsStorage (None without that setting:
        the Functions host then keeps its locks in memory, for one instance)."""
        try:
            storage = connection_string("AzureWebJobsStorage", self.settings)
        except HostConfigurationError:
            logger.debug("%s: no AzureWebJobsStorage, so no singleton lock", spec.name)
            return None
        singleton = self.options.singleton
        return ListenerLock(
            storage,
            listener_lock_id(host_id(self.settings, self.script), spec.name),
            period=singleton.listener_lock_period,
            recovery_interval=singleton.listener_lock_recovery_polling_interval,
        )

    def stop(self) -> None:
        """Stop every trigger (in-flight invocations finish, bounded), then the worker, then
        the gRPC server (settlement); put the environment and the working directory back."""
        for listener in reversed(self._listeners):
            try:
                listener.stop(self.drain_timeout)
            except Exception:
                logger.exception("Stopping %r failed", listener)
        self._listeners.clear()
        # The worker first: what still runs in it may settle through the server.
        if self._worker is not None:
            self._worker.finish()
            self._worker = None
        self._settlement.stop()
        worker_process.release(self)
        if self._saved_cwd is not None:
            os.chdir(self._saved_cwd)
            self._saved_cwd = None
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
        master = self.settings.get(MASTER_KEY_SETTING) or self._generated_keys[0]
        host = self.settings.get(HOST_KEY_SETTING) or self._generated_keys[1]
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
