"""The whole app on this machine: Azurite, the Service Bus emulator (with the queues of
infra/local/config.json and a session queue for each declared pipeline), a stand-in for Azure
Communication Services Email (where the receipts go, as in Azure: localdev/email_service.py),
an SMTP sink (for EMAIL_SENDER=smtp), and function_app.py on the local host, wired together.

``run_stack()`` starts it as a context manager: everything it started is stopped on the way
out (the host first, so nothing it runs loses the broker under it), and the environment is put
back. ``make up`` (``localdev/up.py``) runs it in the foreground on the standard ports with its
data under ``.data/``; ``make demo`` and the end-to-end tests run it on free ports, in memory.
"""

from __future__ import annotations

import copy
import json
import os
import secrets
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from functions_local_host import LocalHost
from functions_local_host.config import load_host_json, load_settings
from functions_local_host.host import (
    HOST_KEY_SETTING,
    MASTER_KEY_SETTING,
    WORKER_PROCESSES_SETTING,
)
from localdev.azurite import Azurite, run_azurite
from localdev.derived_files import emulator_queues
from localdev.email_http import RunningEmailService, run_email_service
from localdev.host_instances import HostInstance, HostInstances
from localdev.mail_sink import MailSink, run_mail_sink
from localdev.ports import choose_port
from localdev.stack_layout import (
    APP_SCRIPT,
    HOST_JSON,
    REPO_ROOT,
    SERVICE_BUS_CONFIG,
    SETTINGS_FILE,
    DataLayout,
    Ports,
)
from shared.adapters.azure_clients import ensure_storage
from shared.bootstrap import app_pipelines
from shared.config import EMAIL_CONNECTION, SERVICE_BUS_CONNECTION, STORAGE_CONNECTION
from shared.entrypoints.http import API_PREFIX

__all__ = ["HOST_JSON", "INSTANCES_SETTING", "LocalStack", "Ports", "create_storage", "run_stack"]

# How many instances of the app the stack runs when run_stack is not told (make up reads it).
INSTANCES_SETTING = "LOCALDEV_HOST_INSTANCES"

Announce = Callable[[str], None]


@dataclass(frozen=True)
class LocalStack:
    azurite: Azurite
    emulator: Any  # servicebus_emulator.testing.EmulatorProcess
    mail: MailSink  # what EMAIL_SENDER=smtp sends to
    email: RunningEmailService  # what EMAIL_SENDER=acs (the default) sends to: its mailbox
    host: LocalHost
    settings: Mapping[str, str]  # the app settings the host runs with
    data: DataLayout | None  # None: everything in memory, gone when the stack stops
    # Instances 2..N of the app, each in a process of its own (``host`` is the first one).
    more_instances: tuple[HostInstance, ...] = ()

    @property
    def api_url(self) -> str:
        """``http://127.0.0.1:<port>/api``: the API's routes carry their ``api/`` prefix
        themselves (host.json sets no route prefix)."""
        return f"{self._routes_url}/{API_PREFIX}"

    @property
    def console_url(self) -> str:
        """``http://127.0.0.1:<port>/console``"""
        return f"{self._routes_url}/console"

    @property
    def _routes_url(self) -> str:
        prefix = self.host.options.route_prefix
        return f"{self.host.http_url}/{prefix}" if prefix else self.host.http_url

    @property
    def function_key(self) -> str:
        return self.host.function_keys.host

    @property
    def storage_connection_string(self) -> str:
        return self.azurite.connection_string

    @property
    def servicebus_connection_string(self) -> str:
        return str(self.emulator.connection_string)


@contextmanager
def run_stack(
    *,
    settings_file: Path = SETTINGS_FILE,
    overrides: Mapping[str, str] | None = None,
    host_json: Mapping[str, Any] | None = None,
    ports: Ports | None = None,
    data_dir: Path | None = None,
    echo_mail: bool = False,
    announce: Announce | None = None,
    instances: int | None = None,
    storage_via: Callable[[Azurite], AbstractContextManager[Any]] | None = None,
    first_instance_functions: Iterable[str] | None = None,
) -> Iterator[LocalStack]:
    """Start Azurite, the emulator, the e-mail stand-in, an SMTP sink and the local host
    running function_app.py.

    Settings: the ``Values`` of ``settings_file`` (its .example when absent), where an
    environment variable of the same name wins (as with ``func start``), then ``overrides``,
    then the connections of what this stack started. ``host_json`` defaults to host.json.
    Each service listens on its port in ``ports`` unless another process holds it (then on a
    free one, and ``announce`` says which process holds it); by default every port is a free
    one, so the stack never collides with another (a running ``make up``).
    With ``data_dir`` Azurite and the emulator keep their data there across runs, the logs go
    to its ``logs`` folder, and the function keys generated on the first run are kept there;
    without, everything is in memory.

    ``instances`` (default: the environment's LOCALDEV_HOST_INSTANCES, else 1) instances of
    the app run on the stack, as Azure scales out: the first in this process (``host``), the
    others each in a process of its own (``more_instances``, localdev/host_instances.py).

    ``storage_via``: what the app and its hosts reach Storage through instead of Azurite
    itself (a test's fault-injecting front): called with the Azurite, entered for the stack's
    life, its ``connection_string`` the app's.
    ``first_instance_functions`` names the functions the first runs (all when None), as
    ``func start --functions`` does: a test that kills instances runs only the API here, so
    that every trigger runs in a process it can kill.
    """
    say: Announce = announce or (lambda _: None)
    ports = ports or Ports()
    count = instance_count(instances)

    def port(wanted: int, what: str) -> int:
        return choose_port(wanted, what, announce=announce)

    file_values = load_settings(settings_file)
    values = {name: os.environ.get(name, value) for name, value in file_values.items()}
    values.update(overrides or {})
    # Every declared pipeline (those of PIPELINE_MODULES too) has its queue setting, by default
    # its declared queue name (an environment variable of the same name still wins).
    for pipeline in app_pipelines({**os.environ, **values}).declared:
        name = pipeline.queue_setting
        values.setdefault(name, os.environ.get(name, pipeline.default_queue))
    # The app's worker runs in a process of its own, as in Azure (the host apart from the
    # language worker); LOCALDEV_WORKER_PROCESSES=false (environment or overrides) runs it in
    # the host's process, where a test can reach into the app.
    values.setdefault(WORKER_PROCESSES_SETTING, os.environ.get(WORKER_PROCESSES_SETTING, "true"))
    data = DataLayout(data_dir) if data_dir is not None else None
    with ExitStack() as stack:
        if data is not None:
            data.logs.mkdir(parents=True, exist_ok=True)
            logs = data.logs
            keys = _function_keys(data.function_keys)
            values = {**{k: v for k, v in keys.items() if k not in os.environ}, **values}
        else:
            logs = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="localstack-")))
        azurite = stack.enter_context(
            run_azurite(
                blob_port=port(ports.blob, "Azurite blob"),
                queue_port=port(ports.queue, "Azurite queue"),
                table_port=port(ports.table, "Azurite table"),
                location=data.azurite if data else None,
                in_memory=data is None,
                log_path=logs / "azurite.log",
            )
        )
        say(
            f"Azurite: blob {azurite.blob_port}, queue {azurite.queue_port}, "
            f"table {azurite.table_port}"
        )
        emulator = stack.enter_context(
            run_servicebus_emulator(
                port=port(ports.servicebus, "Service Bus"),
                http_port=port(ports.servicebus_http, "Service Bus emulator status"),
                data_dir=data.servicebus if data else None,
                log_path=logs / "servicebus.log",
                session_queues=[
                    values[p.queue_setting]
                    for p in app_pipelines({**os.environ, **values}).declared
                ],
            )
        )
        say(f"Service Bus emulator: amqp port {emulator.port}, status {emulator.http_url}")
        mail = stack.enter_context(run_mail_sink(port(ports.smtp, "SMTP"), echo=echo_mail))
        say(f"SMTP sink (receipts are kept, not sent): {mail.host}:{mail.port}")
        email = stack.enter_context(
            run_email_service(port(ports.email, "Communication Services Email"), echo=echo_mail)
        )
        say(
            f"Communication Services Email stand-in (receipts are kept, not sent): {email.endpoint}"
        )

        app_storage = azurite.connection_string
        if storage_via is not None:
            app_storage = stack.enter_context(storage_via(azurite)).connection_string
        # What this stack started wins over local.settings.json: the app must talk to it.
        values.update(
            {
                STORAGE_CONNECTION: app_storage,
                SERVICE_BUS_CONNECTION: emulator.connection_string,
                "SMTP_HOST": mail.host,
                "SMTP_PORT": str(mail.port),
                "SMTP_STARTTLS": "false",
                "SMTP_USERNAME": "",
                "SMTP_PASSWORD": "",
                EMAIL_CONNECTION: email.connection_string,
            }
        )
        # The console checks a key it is given against the host's keys: the app must see
        # them, so the keys the host would generate are chosen here instead (a setting of the
        # same name in the environment still wins, as it does for the host).
        for name in (MASTER_KEY_SETTING, HOST_KEY_SETTING):
            values[name] = values.get(name) or os.environ.get(name) or secrets.token_urlsafe(32)
        create_storage(azurite.connection_string, values)

        if str(REPO_ROOT) not in sys.path:
            sys.path.insert(0, str(REPO_ROOT))
        # The app builds its clients once per process from the settings: start from a clean
        # composition root, and leave none behind that points at a stopped stack.
        from shared.bootstrap import use_container

        use_container(None)
        stack.callback(use_container, None)
        document = copy.deepcopy(dict(host_json)) if host_json else load_host_json(HOST_JSON)
        http_port = port(ports.http, "HTTP")
        # The API's URLs start where this stack serves it (the app never takes them from a
        # request's Host header); a setting of the same name still wins.
        values["PUBLIC_BASE_URL"] = (
            values.get("PUBLIC_BASE_URL")
            or os.environ.get("PUBLIC_BASE_URL")
            or f"http://127.0.0.1:{http_port}"
        )
        host = LocalHost(
            APP_SCRIPT, values, document, http_port=http_port, functions=first_instance_functions
        )
        stack.enter_context(host)
        more: tuple[HostInstance, ...] = ()
        if count > 1:
            scaled = HostInstances(
                count, settings=values, host_json=document, logs=logs, settings_file=settings_file
            )
            scaled.start()
            stack.callback(scaled.stop)
            more = tuple(scaled.instances)
            say(f"Host instances 2-{count}: pids {', '.join(str(i.pid) for i in more)}")
        yield LocalStack(azurite, emulator, mail, email, host, dict(values), data, more)


def instance_count(instances: int | None) -> int:
    """``instances``, else LOCALDEV_HOST_INSTANCES, else 1; at least 1."""
    if instances is None:
        given = os.environ.get(INSTANCES_SETTING, "").strip() or "1"
        if not given.isdigit():
            raise SystemExit(f"{INSTANCES_SETTING}={given!r}: expected a number of instances")
        instances = int(given)
    if instances < 1:
        raise SystemExit(f"{instances} instances: a stack runs at least one")
    return instances


@contextmanager
def run_servicebus_emulator(
    *,
    port: int,
    http_port: int,
    data_dir: Path | None,
    log_path: Path,
    session_queues: Sequence[str] = (),
) -> Iterator[Any]:
    """The project's emulator with the queues of infra/local/config.json and a session queue
    for each of ``session_queues`` it lacks (the declared pipelines'), as a subprocess; with
    ``data_dir`` its messages survive a restart."""
    if not SERVICE_BUS_CONFIG.exists():
        raise SystemExit(f"{SERVICE_BUS_CONFIG} is missing: it lists the Service Bus queues.")
    config = json.loads(SERVICE_BUS_CONFIG.read_text())
    (namespace,) = config["UserConfig"]["Namespaces"]
    listed = {queue["Name"] for queue in namespace["Queues"]}
    namespace["Queues"] += emulator_queues(
        q for q in dict.fromkeys(session_queues) if q not in listed
    )
    config_path = log_path.with_name("servicebus-config.json")
    config_path.write_text(json.dumps(config, indent=2) + "\n")
    try:
        from servicebus_emulator.testing import EmulatorProcess
    except ImportError as error:
        raise SystemExit(
            f"The Service Bus emulator (packages/servicebus-emulator) cannot be imported: {error}"
        ) from error

    emulator = EmulatorProcess(
        config_path, host="127.0.0.1", port=port, data_dir=data_dir, log_path=log_path
    )
    emulator.http_port = http_port
    emulator.start()
    try:
        yield emulator
    finally:
        emulator.stop()


def _function_keys(path: Path) -> dict[str, str]:
    """The host's master and host keys, made on the first run and kept in ``path``, so the key
    a user copied still works after a restart (a setting of the same name still wins)."""
    try:
        keys = {str(k): str(v) for k, v in json.loads(path.read_text()).items()}
    except (OSError, ValueError):
        keys = {}
    if not {MASTER_KEY_SETTING, HOST_KEY_SETTING} <= set(keys):
        keys = {
            MASTER_KEY_SETTING: secrets.token_urlsafe(32),
            HOST_KEY_SETTING: secrets.token_urlsafe(32),
        }
        path.write_text(json.dumps(keys, indent=2) + "\n")
        path.chmod(0o600)
    return keys


def create_storage(connection_string: str, values: Mapping[str, str]) -> None:
    """The tables, containers and queues the app expects to exist (as infra creates them):
    with ``values`` (the app's settings), the tables of the pipelines of ``PIPELINE_MODULES``
    too, and the replay queue ``REPLAY_QUEUE_NAME`` names."""
    from azure.data.tables import TableServiceClient
    from azure.storage.blob import BlobServiceClient
    from azure.storage.queue import QueueServiceClient

    from shared.bootstrap.declared import app_tables

    replay_queue = values.get("REPLAY_QUEUE_NAME")
    queues = [replay_queue, f"{replay_queue}-poison"] if replay_queue else []
    ensure_storage(
        TableServiceClient.from_connection_string(connection_string),
        BlobServiceClient.from_connection_string(connection_string),
        QueueServiceClient.from_connection_string(connection_string),
        tables=app_tables({**os.environ, **values}),
        queues=queues,
    )
