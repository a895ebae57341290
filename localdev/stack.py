"""The whole app on this machine: Azurite, the Service Bus emulator (with the queues of
infra/local/config.json), an SMTP sink for the receipts, and function_app.py on the local host,
wired together.

``python -m localdev.stack`` (``make up``) runs it in the foreground on the standard ports
(10000-10002, 5672, 7071) when they are free, else on free ones, until Ctrl-C.
``run_stack()`` is the same stack as a context manager, for ``make demo`` and the end-to-end
tests: everything it started is stopped on the way out, and the environment is put back.
"""

from __future__ import annotations

import argparse
import copy
import inspect
import json
import logging
import os
import secrets
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from localdev.azurite import Azurite, free_port, run_azurite
from localdev.host import LocalHost
from localdev.host.config import load_host_json, load_settings
from localdev.host.host import HOST_KEY_SETTING, MASTER_KEY_SETTING
from shared.adapters.azure_clients import ensure_storage
from shared.config import SERVICE_BUS_CONNECTION, STORAGE_CONNECTION

REPO_ROOT = Path(__file__).resolve().parent.parent
# The emulator config the infrastructure owns (the Docker emulator reads the same file).
SERVICE_BUS_CONFIG = REPO_ROOT / "infra" / "local" / "config.json"
SETTINGS_FILE = REPO_ROOT / "local.settings.json"
HOST_JSON = REPO_ROOT / "host.json"
APP_SCRIPT = REPO_ROOT / "function_app.py"
AZURITE_PORTS = (10000, 10001, 10002)
SERVICE_BUS_PORT = 5672
SMTP_PORT = 1025
HTTP_PORT = 7071

logger = logging.getLogger("localdev.stack")

Announce = Callable[[str], None]


def port_or_free(port: int, what: str, announce: Announce | None = print) -> int:
    """``port`` when nothing listens there, else a free one (and say so)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            chosen = free_port()
            if announce:
                announce(f"Port {port} ({what}) is taken: using {chosen} instead.")
            return chosen
    return port


def service_bus_config() -> dict[str, Any]:
    if not SERVICE_BUS_CONFIG.exists():
        raise SystemExit(f"{SERVICE_BUS_CONFIG} is missing: it lists the Service Bus queues.")
    return dict(json.loads(SERVICE_BUS_CONFIG.read_text()))


def run_servicebus_emulator(config: dict[str, Any], port: int | None) -> Any:
    """The emulator's ``run_emulator`` context manager, on ``port`` (``None``: a free one)."""
    try:
        from localdev.servicebus_emulator.testing import run_emulator
    except ImportError as error:
        raise SystemExit(
            f"The Service Bus emulator (localdev/servicebus_emulator) cannot be imported: {error}"
        ) from error

    if port is not None and "port" in inspect.signature(run_emulator).parameters:
        return run_emulator(config, port=port)
    return run_emulator(config)


@dataclass
class MailSink:
    """An SMTP server that accepts every message and keeps it (parsed), so a demo or a test
    can see which receipts went out. ``echo`` prints one line per message."""

    host: str
    port: int
    echo: bool = False
    messages: list[EmailMessage] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = message_from_bytes(envelope.original_content, policy=policy.default)
        assert isinstance(message, EmailMessage)
        with self._lock:
            self.messages.append(message)
        if self.echo:
            print(f"[smtp] {message['Subject']!s} -> {', '.join(envelope.rcpt_tos)}", flush=True)
        return "250 OK"

    def received(self) -> list[EmailMessage]:
        with self._lock:
            return list(self.messages)


@contextmanager
def run_mail_sink(port: int | None = None, *, echo: bool = False) -> Iterator[MailSink]:
    from aiosmtpd.controller import Controller

    sink = MailSink(host="127.0.0.1", port=port or free_port(), echo=echo)
    controller = Controller(sink, hostname=sink.host, port=sink.port)
    controller.start()
    try:
        yield sink
    finally:
        controller.stop()


@dataclass(frozen=True)
class LocalStack:
    azurite: Azurite
    emulator: Any  # localdev.servicebus_emulator.testing's running emulator
    mail: MailSink
    host: LocalHost
    settings: Mapping[str, str]  # the app settings the host runs with

    @property
    def api_url(self) -> str:
        """``http://127.0.0.1:<port>/api``"""
        return f"{self.host.http_url}/{self.host.options.route_prefix}".rstrip("/")

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
    standard_ports: bool = False,
    http_port: int | None = None,
    echo_mail: bool = False,
    announce: Announce | None = None,
) -> Iterator[LocalStack]:
    """Start Azurite, the emulator, an SMTP sink and the local host running function_app.py.

    Settings: the ``Values`` of ``settings_file`` (its .example when absent), where an
    environment variable of the same name wins (as with ``func start``), then ``overrides``,
    then the connections of what this stack started. ``host_json`` defaults to host.json.
    With ``standard_ports`` each service takes its usual port when it is free; otherwise
    every port is a free one, so the stack never collides with another (a running ``make up``).
    """
    say: Announce = announce or (lambda _: None)

    def port(standard: int, what: str) -> int | None:
        return port_or_free(standard, what, announce) if standard_ports else None

    file_values = load_settings(settings_file)
    values = {name: os.environ.get(name, value) for name, value in file_values.items()}
    values.update(overrides or {})
    with ExitStack() as stack:
        blob, queue, table = (port(p, "Azurite") for p in AZURITE_PORTS)
        azurite = stack.enter_context(
            run_azurite(blob_port=blob, queue_port=queue, table_port=table)
        )
        say(
            f"Azurite: blob {azurite.blob_port}, queue {azurite.queue_port}, "
            f"table {azurite.table_port}"
        )
        emulator = stack.enter_context(
            run_servicebus_emulator(service_bus_config(), port(SERVICE_BUS_PORT, "Service Bus"))
        )
        say(f"Service Bus emulator: {emulator.connection_string}")
        mail = stack.enter_context(run_mail_sink(port(SMTP_PORT, "SMTP"), echo=echo_mail))
        say(f"SMTP sink (receipts are kept, not sent): {mail.host}:{mail.port}")

        # What this stack started wins over local.settings.json: the app must talk to it.
        values.update(
            {
                STORAGE_CONNECTION: azurite.connection_string,
                SERVICE_BUS_CONNECTION: emulator.connection_string,
                "SMTP_HOST": mail.host,
                "SMTP_PORT": str(mail.port),
                "SMTP_STARTTLS": "false",
                "SMTP_USERNAME": "",
                "SMTP_PASSWORD": "",
            }
        )
        # The console checks a key it is given against the host's keys: the app must see
        # them, so the keys the host would generate are chosen here instead.
        for name in (MASTER_KEY_SETTING, HOST_KEY_SETTING):
            values[name] = values.get(name) or secrets.token_urlsafe(32)
        create_storage(azurite.connection_string, values.get("REPLAY_QUEUE_NAME"))

        if str(REPO_ROOT) not in sys.path:
            sys.path.insert(0, str(REPO_ROOT))
        # The app builds its clients once per process from the settings: start from a clean
        # composition root, and leave none behind that points at a stopped stack.
        from shared.bootstrap import use_container

        use_container(None)
        stack.callback(use_container, None)
        host = LocalHost(
            APP_SCRIPT,
            values,
            copy.deepcopy(dict(host_json)) if host_json else load_host_json(HOST_JSON),
            http_port=http_port if http_port is not None else port(HTTP_PORT, "HTTP") or 0,
        )
        stack.enter_context(host)
        yield LocalStack(azurite, emulator, mail, host, dict(values))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localdev.stack", description=__doc__)
    parser.add_argument("--settings", type=Path, default=SETTINGS_FILE)
    parser.add_argument("--port", type=int, default=None, help="HTTP port (default 7071)")
    parser.add_argument(
        "--create-storage",
        action="store_true",
        help="only create the app's tables, containers and queues in the AzureWebJobsStorage "
        "account of the settings (e.g. the Azurite of infra/local/docker-compose.yml), then exit",
    )
    args = parser.parse_args(argv)
    if args.create_storage:
        values = load_settings(args.settings)
        values = {name: os.environ.get(name, value) for name, value in values.items()}
        from localdev.host.config import connection_string

        create_storage(
            connection_string(STORAGE_CONNECTION, values), values.get("REPLAY_QUEUE_NAME")
        )
        print("Created the app's tables, containers and queues (those that were missing).")
        return 0
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(message)s", stream=sys.stdout)
    for noisy in ("azure", "uamqp", "mail.log", "localdev.servicebus_emulator"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())

    with run_stack(
        settings_file=args.settings,
        standard_ports=True,
        http_port=args.port,
        echo_mail=True,
        announce=lambda line: print(line, flush=True),
    ) as local:
        print(
            f"\nThe app runs at {local.api_url}/  (x-functions-key: {local.function_key}; "
            f"master key {local.host.function_keys.master})\n"
            f'Try: curl -H "x-functions-key: {local.function_key}" '
            f"{local.api_url}/failed-session-groups\n"
            "Press Ctrl+C to stop everything.",
            flush=True,
        )
        stop.wait()
        print("Stopping the host, the Service Bus emulator and Azurite...", flush=True)
    return 0


def create_storage(connection_string: str, replay_queue: str | None) -> None:
    """The tables, containers and queues the app expects to exist (as infra creates them)."""
    from azure.data.tables import TableServiceClient
    from azure.storage.blob import BlobServiceClient
    from azure.storage.queue import QueueServiceClient

    queues = [replay_queue, f"{replay_queue}-poison"] if replay_queue else []
    ensure_storage(
        TableServiceClient.from_connection_string(connection_string),
        BlobServiceClient.from_connection_string(connection_string),
        QueueServiceClient.from_connection_string(connection_string),
        queues=queues,
    )


if __name__ == "__main__":
    sys.exit(main())
