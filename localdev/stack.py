"""``make up``: the whole app on this machine. Starts Azurite and the Service Bus emulator
(on their standard ports 10000-10002 and 5672 when free, else on free ones), with the queues of
infra/local/config.json, and an SMTP sink for the receipts; creates the tables, containers and
queues the app needs, then runs function_app.py on the local host with the settings pointing
at them. Ctrl-C stops everything it started.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from localdev.azurite import free_port, run_azurite
from localdev.host import LocalHost
from localdev.host.config import apply_settings, load_host_json, load_settings
from shared.adapters.azure_clients import ensure_storage
from shared.config import SERVICE_BUS_CONNECTION, STORAGE_CONNECTION

REPO_ROOT = Path(__file__).resolve().parent.parent
# The emulator config the infrastructure owns (the Docker emulator reads the same file).
SERVICE_BUS_CONFIG = REPO_ROOT / "infra" / "local" / "config.json"
AZURITE_PORTS = (10000, 10001, 10002)
SERVICE_BUS_PORT = 5672
HTTP_PORT = 7071

logger = logging.getLogger("localdev.stack")


def port_or_free(port: int, what: str) -> int:
    """``port`` when nothing listens there, else a free one (and say so)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            chosen = free_port()
            print(f"Port {port} ({what}) is taken: using {chosen} instead.", flush=True)
            return chosen
    return port


def service_bus_config() -> dict[str, Any]:
    if not SERVICE_BUS_CONFIG.exists():
        raise SystemExit(f"{SERVICE_BUS_CONFIG} is missing: it lists the Service Bus queues.")
    return dict(json.loads(SERVICE_BUS_CONFIG.read_text()))


def run_servicebus_emulator(config: dict[str, Any], port: int) -> Any:
    """The emulator's ``run_emulator`` context manager, on ``port`` when it takes one."""
    try:
        from localdev.servicebus_emulator.testing import run_emulator
    except ImportError as error:
        raise SystemExit(
            f"The Service Bus emulator (localdev/servicebus_emulator) cannot be imported: {error}"
        ) from error

    parameters = inspect.signature(run_emulator).parameters
    if "port" in parameters:
        return run_emulator(config, port=port)
    return run_emulator(config)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localdev.stack", description=__doc__)
    parser.add_argument("--settings", type=Path, default=REPO_ROOT / "local.settings.json")
    parser.add_argument("--port", type=int, default=HTTP_PORT, help="HTTP port of the host")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(message)s", stream=sys.stdout)
    for noisy in ("azure", "uamqp", "mail.log", "localdev.servicebus_emulator"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())

    settings = load_settings(args.settings)
    config = service_bus_config()
    with ExitStack() as stack:
        blob, queue, table = (port_or_free(p, "Azurite") for p in AZURITE_PORTS)
        azurite = stack.enter_context(
            run_azurite(blob_port=blob, queue_port=queue, table_port=table)
        )
        print(f"Azurite: blob {blob}, queue {queue}, table {table}", flush=True)
        emulator = stack.enter_context(
            run_servicebus_emulator(config, port_or_free(SERVICE_BUS_PORT, "Service Bus"))
        )
        print(f"Service Bus emulator: {emulator.connection_string}", flush=True)
        smtp_port = port_or_free(int(settings.get("SMTP_PORT") or 1025), "SMTP")
        stack.enter_context(run_smtp_sink(smtp_port))
        print(f"SMTP sink (receipts are printed, not sent): 127.0.0.1:{smtp_port}", flush=True)

        # What this stack started wins over local.settings.json: the app must talk to it.
        os.environ[STORAGE_CONNECTION] = azurite.connection_string
        os.environ[SERVICE_BUS_CONNECTION] = emulator.connection_string
        os.environ["SMTP_HOST"], os.environ["SMTP_PORT"] = "127.0.0.1", str(smtp_port)
        apply_settings(settings)
        create_storage(azurite.connection_string)

        sys.path.insert(0, str(REPO_ROOT))
        app = importlib.import_module("function_app").app
        host = LocalHost(
            app,
            dict(os.environ),
            load_host_json(REPO_ROOT / "host.json"),
            http_port=port_or_free(args.port, "HTTP"),
        )
        stack.enter_context(host)
        print(
            f"\nThe app runs at {host.http_url}/api/  "
            f"(x-functions-key: {host.function_keys.host}; master key "
            f"{host.function_keys.master})\nPress Ctrl+C to stop everything.",
            flush=True,
        )
        stop.wait()
        print("Stopping the host, the Service Bus emulator and Azurite...", flush=True)
    return 0


@contextmanager
def run_smtp_sink(port: int) -> Iterator[None]:
    """An SMTP server that accepts every receipt e-mail and prints who it was for."""
    from aiosmtpd.controller import Controller

    class PrintMail:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            print(f"[smtp] mail from {envelope.mail_from} to {envelope.rcpt_tos}", flush=True)
            return "250 OK"

    controller = Controller(PrintMail(), hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield
    finally:
        controller.stop()


def create_storage(connection_string: str) -> None:
    from azure.data.tables import TableServiceClient
    from azure.storage.blob import BlobServiceClient
    from azure.storage.queue import QueueServiceClient

    replay_queue = os.environ.get("REPLAY_QUEUE_NAME")
    queues = [replay_queue, f"{replay_queue}-poison"] if replay_queue else []
    ensure_storage(
        TableServiceClient.from_connection_string(connection_string),
        BlobServiceClient.from_connection_string(connection_string),
        QueueServiceClient.from_connection_string(connection_string),
        queues=queues,
    )


if __name__ == "__main__":
    sys.exit(main())
