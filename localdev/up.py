"""``python -m localdev.up`` (``make up``): the whole app on this machine, in the foreground,
until Ctrl-C.

Azurite, the Service Bus emulator, an SMTP sink and function_app.py on the local host, on the
standard ports (a free one instead of any another process holds, naming that process), with
Azurite's and the emulator's data, the function keys and the logs under ``.data/`` so that a
restart finds everything as it was. ``--reset`` (``make reset``) deletes ``.data/``.

Ctrl-C in a terminal reaches every process of the foreground group; if it reached Azurite and
the emulator directly they would stop while the host still ran on them. So this process only
supervises: the stack runs in a child process in a session of its own (``--serve``), which
stops the host first and the broker and storage after it when told to stop.
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

# Only the standard library and the layout here: the supervisor starts at once, and the child
# it starts imports the stack (the Azure SDKs, the app) once.
from localdev.stack_layout import (
    DATA_DIR,
    SETTINGS_FILE,
    STANDARD_PORTS,
    DataLayout,
    Ports,
    shown,
)

_PORT_NAMES = [f.name.replace("_", "-") for f in dataclasses.fields(Ports)]
_NOISY_LOGGERS = ("azure", "uamqp", "mail.log", "servicebus_emulator")


class StackLocked(RuntimeError):
    """Another ``make up`` runs on the same data folder."""


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.create_storage:
        return _create_storage(args.settings)
    if args.reset:
        return reset(args.data_dir)
    if args.serve:
        return serve(args)
    return supervise(sys.argv[1:] if argv is None else argv)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m localdev.up", description=__doc__)
    parser.add_argument("--settings", type=Path, default=SETTINGS_FILE)
    parser.add_argument(
        "--data-dir", type=Path, default=DATA_DIR, help="where the data and logs live (.data/)"
    )
    parser.add_argument(
        "--port",
        dest="ports",
        action="append",
        default=[],
        metavar="[NAME=]PORT",
        help=f"a port other than the standard one; NAME: {', '.join(_PORT_NAMES)} "
        "(default http). Repeat for several.",
    )
    parser.add_argument(
        "--instances",
        type=int,
        default=None,
        help="instances of the app on the stack, as Azure scales out (default "
        "$LOCALDEV_HOST_INSTANCES, else 1); the 2nd and later each run in a process of their "
        "own and log to logs/host-<n>.log",
    )
    parser.add_argument("--reset", action="store_true", help="delete the data folder, then exit")
    parser.add_argument(
        "--create-storage",
        action="store_true",
        help="only create the app's tables, containers and queues in the AzureWebJobsStorage "
        "account of the settings (e.g. the Azurite of infra/local/docker-compose.yml), then exit",
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    return parser


def ports_from(options: list[str]) -> Ports:
    """``["http=8080", "5673"]`` -> the standard ports with those changed (a bare port is HTTP)."""
    changes: dict[str, int] = {}
    for option in options:
        name, _, port = option.rpartition("=")
        name = (name or "http").replace("-", "_")
        if name.replace("_", "-") not in _PORT_NAMES or not port.isdigit():
            raise SystemExit(f"--port {option}: expected [NAME=]PORT, NAME one of {_PORT_NAMES}")
        changes[name] = int(port)
    return dataclasses.replace(STANDARD_PORTS, **changes)


def supervise(argv: list[str]) -> int:
    """Run ``--serve`` in a session of its own; the first Ctrl-C (or SIGTERM) asks it to stop,
    a second one kills it and everything it started."""
    child = subprocess.Popen(
        [sys.executable, "-m", "localdev.up", "--serve", *argv],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
    )
    asked = threading.Event()

    def forward(signum: int, frame: object) -> None:
        if child.poll() is not None:
            return
        if not asked.is_set():
            asked.set()
            child.send_signal(signal.SIGTERM)
            return
        print("\nKilling the stack now (a second interrupt).", flush=True)
        os.killpg(child.pid, signal.SIGKILL)

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    return child.wait()


def serve(args: argparse.Namespace) -> int:
    # Asked to stop while it starts (the imports take seconds): it starts, then stops at once.
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())

    from localdev.stack import run_stack
    from localdev.stack_env import summary, write_env_file

    data = DataLayout(args.data_dir)
    data.logs.mkdir(parents=True, exist_ok=True)
    parent = os.getppid()
    try:
        with _holding(data.lock):
            _log_to(data.host_log)
            with run_stack(
                settings_file=args.settings,
                ports=ports_from(args.ports),
                data_dir=data.root,
                echo_mail=True,
                announce=lambda line: print(line, flush=True),
                instances=args.instances,
            ) as local:
                write_env_file(local, data.env_file)
                print(summary(local), flush=True)
                # The supervisor gone (killed) is a stop too: nothing is left behind.
                while not stop.wait(1.0) and os.getppid() == parent:
                    pass
                print(
                    "\nStopping: the host (letting invocations in flight finish), then the "
                    "SMTP sink, the Service Bus emulator and Azurite...",
                    flush=True,
                )
    except StackLocked as error:
        print(error, file=sys.stderr, flush=True)
        return 1
    except RuntimeError as error:  # Azurite, the emulator or the host could not start
        print(f"make up could not start: {error}", file=sys.stderr, flush=True)
        print(f"The logs are in {shown(data.logs)}/.", file=sys.stderr, flush=True)
        return 1
    print(f"Stopped. The data stays in {shown(data.root)}/ (make reset deletes it).", flush=True)
    return 0


def reset(data_dir: Path) -> int:
    if not data_dir.exists():
        print(f"{shown(data_dir)}/ does not exist: nothing to delete.")
        return 0
    data = DataLayout(data_dir)
    try:
        with _holding(data.lock):
            shutil.rmtree(data_dir)
    except StackLocked as error:
        print(f"{error} Stop it (Ctrl-C) before `make reset`.", file=sys.stderr)
        return 1
    print(
        f"Deleted {shown(data_dir)}/ (Azurite's blobs, queues and tables, the Service Bus "
        "messages, the function keys, the logs): the next `make up` starts clean."
    )
    return 0


@contextmanager
def _holding(lock_path: Path) -> Iterator[IO[str]]:
    """An exclusive lock on the data folder while the block runs: two stacks writing the same
    Azurite files would corrupt them."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "?"
            raise StackLocked(
                f"A `make up` (pid {holder}) is running on {shown(lock_path.parent)}/."
            ) from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        yield lock


class _Formatter(logging.Formatter):
    """``[time] message``, with the level in front of warnings and errors."""

    def __init__(self) -> None:
        super().__init__("[%(asctime)s] %(message)s")
        self._marked = logging.Formatter("[%(asctime)s] %(levelname)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        if record.levelno >= logging.WARNING:
            return self._marked.format(record)
        return super().format(record)


def _log_to(log_file: Path) -> None:
    """The host's log on stdout, as ``func start`` shows it, and in ``log_file``."""
    formatter = _Formatter()
    handlers: list[logging.Handler] = [
        logging.StreamHandler(sys.stdout),
        logging.FileHandler(log_file),
    ]
    for handler in handlers:
        handler.setFormatter(formatter)
    logging.basicConfig(level=logging.INFO, handlers=handlers)
    for noisy in _NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _create_storage(settings_file: Path) -> int:
    from functions_local_host.config import connection_string, load_settings
    from localdev.stack import create_storage
    from shared.config import STORAGE_CONNECTION

    values = load_settings(settings_file)
    values = {name: os.environ.get(name, value) for name, value in values.items()}
    create_storage(connection_string(STORAGE_CONNECTION, values), values)
    print("Created the app's tables, containers and queues (those that were missing).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
