"""Run the emulator as a subprocess for tests, benchmarks and ``make up``.

with run_emulator(config) as emulator:      # config: a dict or a config.json path
    client = ServiceBusClient.from_connection_string(emulator.connection_string)
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .server import CONNECTION_STRING


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class EmulatorProcess:
    def __init__(
        self,
        config: Path,
        *,
        host: str,
        port: int,
        data_dir: Path | None,
        log_path: Path,
        idle_timeout: float | None = None,
    ) -> None:
        self.idle_timeout = idle_timeout
        self.config = config
        self.host = host
        self.port = port
        self.http_port = free_port(host)
        self.data_dir = data_dir
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def connection_string(self) -> str:
        return CONNECTION_STRING.format(host=self.host, port=self.port)

    @property
    def http_url(self) -> str:
        return f"http://{self.host}:{self.http_port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self, timeout: float = 30) -> None:
        command = [
            sys.executable, "-m", "servicebus_emulator", "--config", str(self.config),
            "--host", self.host, "--port", str(self.port), "--http-port", str(self.http_port),
        ]  # fmt: skip
        if self.data_dir is not None:
            command += ["--data-dir", str(self.data_dir)]
        if self.idle_timeout is not None:
            command += ["--idle-timeout", str(self.idle_timeout)]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"the Service Bus emulator exited with {self.process.returncode}:\n{self.log()}"
                )
            if self.healthy():
                return
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(
            f"the Service Bus emulator did not get ready in {timeout}s:\n{self.log()}"
        )

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.http_url}/health", timeout=1) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def health(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.http_url}/health", timeout=5) as response:
            return dict(json.load(response))

    def counts(self) -> dict[str, dict[str, int]]:
        with urllib.request.urlopen(f"{self.http_url}/queues", timeout=5) as response:
            return dict(json.load(response))

    def operations(self) -> dict[str, dict[str, int]]:
        """What clients asked of each entity, by kind, since the emulator started."""
        with urllib.request.urlopen(f"{self.http_url}/operations", timeout=5) as response:
            return dict(json.load(response))

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self, timeout: float = 10) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL: what a crash looks like."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def restart(self) -> None:
        self.stop()
        self.start()


@contextlib.contextmanager
def run_emulator(
    config: dict[str, Any] | str | Path,
    *,
    port: int | None = None,
    data_dir: str | Path | None = None,
    host: str = "127.0.0.1",
    idle_timeout: float | None = None,
) -> Iterator[EmulatorProcess]:
    """Start the emulator on ``port`` (a free one by default); stop it on exit."""
    with tempfile.TemporaryDirectory(prefix="sbemulator-") as tmp:
        if isinstance(config, dict):
            path = Path(tmp) / "config.json"
            path.write_text(json.dumps(config))
        else:
            path = Path(config)
        emulator = EmulatorProcess(
            path,
            host=host,
            port=port or free_port(host),
            data_dir=Path(data_dir) if data_dir is not None else None,
            log_path=Path(tmp) / "emulator.log",
            idle_timeout=idle_timeout,
        )
        emulator.start()
        try:
            yield emulator
        finally:
            emulator.stop()
