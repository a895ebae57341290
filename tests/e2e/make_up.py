"""``make up`` as a user runs it, for the tests: ``python -m localdev.up`` in a process group of
its own (as a shell runs a foreground job), stopped with SIGINT to the whole group (what Ctrl-C
in the terminal does). The ports are free ones picked by the test, passed with ``--port``,
and the data folder is the test's."""

from __future__ import annotations

import dataclasses
import os
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

from functions_local_host.config import load_settings
from localdev.ports import free_port
from localdev.stack_layout import SETTINGS_FILE, DataLayout, Ports
from tests import polling

REPO_ROOT = Path(__file__).resolve().parents[2]
READY = "Press Ctrl+C to stop everything."


def free_ports() -> Ports:
    return Ports(**{f.name: free_port() for f in dataclasses.fields(Ports)})


def port_options(ports: Ports) -> list[str]:
    return [
        f"--port={f.name.replace('_', '-')}={getattr(ports, f.name)}"
        for f in dataclasses.fields(Ports)
    ]


class MakeUp:
    def __init__(
        self,
        data_dir: Path,
        ports: Ports,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path = REPO_ROOT,
        settings: Path | None = None,
    ) -> None:
        self.data = DataLayout(data_dir)
        self.lines: list[str] = []
        command = [sys.executable, "-m", "localdev.up", "--data-dir", str(data_dir)]
        if settings is not None:
            command += ["--settings", str(settings)]
        self._process = subprocess.Popen(
            [*command, *port_options(ports)],
            cwd=cwd,
            env={**_without_app_settings(os.environ), **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_ready(self, timeout: float = 90) -> MakeUp:
        polling.wait_for(
            lambda: READY in self.lines or self._process.poll() is not None,
            timeout,
            "make up to print its summary",
            interval=0.2,
        )
        assert READY in self.lines, f"make up exited with {self._process.poll()}:\n{self.output}"
        return self

    def exports(self) -> dict[str, str]:
        """The ``export`` lines of .data/stack.env (the same lines the summary shows)."""
        values = {}
        for line in self.data.env_file.read_text().splitlines():
            if line.startswith("export "):
                name, _, value = line.removeprefix("export ").partition("=")
                values[name] = shlex.split(value)[0]
        return values

    def interrupt(self, timeout: float = 90) -> int:
        """Ctrl-C: SIGINT to every process of the group; the exit code once it stopped."""
        os.killpg(self._process.pid, signal.SIGINT)
        code = self._process.wait(timeout)
        self._reader.join(10)
        return code

    def kill(self) -> None:
        """For the tests' own cleanup: the whole group, whatever state it is in."""
        if self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGINT)
            try:
                self._process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self._process.pid, signal.SIGKILL)
                self._process.wait(10)


def _without_app_settings(environ: Mapping[str, str]) -> dict[str, str]:
    """The test process's environment without the app's settings: a stack run in this process
    (the worker in the host's process reads its settings from the environment) leaves them
    there, and make up takes an environment variable over local.settings.json."""
    settings = set(load_settings(SETTINGS_FILE))
    return {name: value for name, value in environ.items() if name not in settings}
