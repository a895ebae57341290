"""Run a real Azurite (Blob, Queue, Table) for tests and local runs.

``run_azurite()`` starts the pinned Azurite from ``node_modules`` on free ports (or the ports
given), waits until every service accepts connections, yields where it listens, and stops it
on the way out; in between it can be stopped and started again on the same ports and data
(``Azurite.stop``, ``Azurite.start``: a Storage outage, as a failover looks to a client).
``python -m localdev.azurite`` runs one in the foreground on the default ports until Ctrl-C.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from localdev.ports import free_port
from shared.adapters.azure_clients import azurite_connection_string

__all__ = ["Azurite", "AzuriteError", "free_port", "run_azurite"]

REPO_ROOT = Path(__file__).resolve().parent.parent
AZURITE = REPO_ROOT / "node_modules" / ".bin" / "azurite"


class AzuriteError(RuntimeError):
    """Azurite is not installed, or did not start."""


@dataclass(frozen=True)
class Azurite:
    host: str
    blob_port: int
    queue_port: int
    table_port: int
    location: Path
    _process: _Process | None = field(default=None, compare=False, repr=False)

    def stop(self) -> None:
        """Stop Azurite: every connection to its ports is refused until ``start``."""
        assert self._process is not None, "not started by run_azurite"
        self._process.stop()

    def start(self) -> None:
        """Start it again on the same ports, with the data it kept (when not in memory)."""
        assert self._process is not None, "not started by run_azurite"
        self._process.start()

    @property
    def connection_string(self) -> str:
        return azurite_connection_string(
            host=self.host,
            blob_port=self.blob_port,
            queue_port=self.queue_port,
            table_port=self.table_port,
        )


@contextmanager
def run_azurite(
    *,
    host: str = "127.0.0.1",
    blob_port: int | None = None,
    queue_port: int | None = None,
    table_port: int | None = None,
    location: Path | None = None,
    in_memory: bool = True,
    log_path: Path | None = None,
    executable: Path = AZURITE,
    startup_timeout: float = 30.0,
) -> Iterator[Azurite]:
    """Start Azurite, yield it once all three services accept connections, stop it after.

    A port left as ``None`` is a free one picked by the OS. Azurite keeps its data in
    ``location`` unless ``in_memory``; its output goes to ``log_path`` (default: in
    ``location``, a temporary folder when none is given). Raises ``AzuriteError`` (with the
    tail of Azurite's output) when it is missing, exits early or does not listen in time."""
    if not executable.exists():
        raise AzuriteError(f"{executable} is missing: run `make setup` to install Azurite.")
    with ExitStack() as stack:
        if location is None:
            location = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="azurite-")))
        azurite = Azurite(
            host=host,
            blob_port=blob_port or free_port(host),
            queue_port=queue_port or free_port(host),
            table_port=table_port or free_port(host),
            location=location,
        )
        # Azurite refuses --location with --inMemoryPersistence; the folder still holds our log.
        if log_path is None:
            log_path = location / "azurite.log"
        command = [
            str(executable),
            "--silent",
            "--skipApiVersionCheck",
            "--blobHost",
            host,
            "--blobPort",
            str(azurite.blob_port),
            "--queueHost",
            host,
            "--queuePort",
            str(azurite.queue_port),
            "--tableHost",
            host,
            "--tablePort",
            str(azurite.table_port),
        ]
        command += ["--inMemoryPersistence"] if in_memory else ["--location", str(location)]
        log_path.write_bytes(b"")
        process = _Process(command, azurite, log_path, startup_timeout)
        stack.callback(process.stop)
        process.start()
        yield replace(azurite, _process=process)


class _Process:
    """Azurite's process, started and stopped on the same command line (ports and data)."""

    def __init__(
        self, command: list[str], azurite: Azurite, log_path: Path, startup_timeout: float
    ) -> None:
        self._command = command
        self._azurite = azurite
        self._log_path = log_path
        self._startup_timeout = startup_timeout
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        if self._process is not None and self._process.poll() is None:
            return
        with self._log_path.open("ab") as log:
            self._process = subprocess.Popen(
                self._command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        try:
            _wait_until_listening(
                self._process, self._azurite, self._log_path, self._startup_timeout
            )
        except AzuriteError:
            self.stop()
            raise

    def stop(self) -> None:
        if self._process is not None:
            _stop(self._process)


def _wait_until_listening(
    process: subprocess.Popen[bytes], azurite: Azurite, log_path: Path, timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    waiting = {azurite.blob_port, azurite.queue_port, azurite.table_port}
    while waiting:
        if process.poll() is not None:
            raise AzuriteError(
                f"Azurite exited with code {process.returncode} before listening:\n"
                + _tail(log_path)
            )
        if time.monotonic() > deadline:
            raise AzuriteError(
                f"Azurite did not listen on ports {sorted(waiting)} within {timeout:.0f} s:\n"
                + _tail(log_path)
            )
        for port in list(waiting):
            try:
                socket.create_connection((azurite.host, port), timeout=0.5).close()
            except OSError:
                continue
            waiting.discard(port)
        if waiting:
            time.sleep(0.1)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no output)"


def main() -> None:
    parser = argparse.ArgumentParser(description="Run Azurite in the foreground.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--blob-port", type=int, default=10000)
    parser.add_argument("--queue-port", type=int, default=10001)
    parser.add_argument("--table-port", type=int, default=10002)
    parser.add_argument(
        "--location", type=Path, help="keep data here (default: in memory, lost on exit)"
    )
    args = parser.parse_args()
    if args.location is not None:
        args.location.mkdir(parents=True, exist_ok=True)
    with run_azurite(
        host=args.host,
        blob_port=args.blob_port,
        queue_port=args.queue_port,
        table_port=args.table_port,
        location=args.location,
        in_memory=args.location is None,
    ) as azurite:
        print(f"Azurite is listening. AzureWebJobsStorage={azurite.connection_string}", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
