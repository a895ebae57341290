"""More instances of the app on one stack, as Azure scales a Functions app out: each one is
``python -m functions_local_host`` in a process of its own, with the same app settings and
host.json, on the same Azurite and Service Bus. Sessions spread over the instances as over
Azure's (each instance's session slots accept whichever session is free at the broker); a timer
runs on the one instance that holds its singleton lock; storage queue messages go to whichever
instance polls first. Each instance serves HTTP on a port of its own (Azure puts a load balancer in
front of them; the stack's API URL is the first instance's).

An instance that dies is started again, as the platform restarts a host whose process ended:
``HostInstances`` watches them while the stack runs.

An instance may run another checkout of the app (``app``: its ``function_app.py``, with the
Python that has its packages), as a deploy runs the release before beside the new one
(tests/upgrade), and only some of its functions (``functions``, as ``func start --functions``).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from localdev.stack_layout import APP_SCRIPT

logger = logging.getLogger("localdev.stack")

READY_LINE = "Host started."
_START_TIMEOUT = 120.0
_STOP_TIMEOUT = 45.0
_WATCH_SECONDS = 0.5


class InstanceFailed(RuntimeError):
    """An instance exited before it was ready; the message names its log."""


class HostInstance:
    """One ``python -m functions_local_host`` process running ``app`` (its folder the working
    directory, so the app imports its own packages) with ``python``; its output goes to
    ``log``. It serves HTTP on ``http_port`` (0: any free port)."""

    def __init__(
        self,
        number: int,
        *,
        environ: Mapping[str, str],
        host_json: Path,
        log: Path,
        settings_file: Path,
        app: Path = APP_SCRIPT,
        python: str = sys.executable,
        functions: Sequence[str] | None = None,
        http_port: int = 0,
    ) -> None:
        self.number = number
        self.log = log
        self.http_port = http_port
        self._environ = dict(environ)
        self._cwd = app.parent
        self._command = [
            python, "-m", "functions_local_host",
            "--app", str(app),
            "--settings", str(settings_file),
            "--host-json", str(host_json),
            "--port", str(http_port),
        ]  # fmt: skip
        if functions:
            self._command += ["--functions", *functions]
        self._process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, timeout: float = _START_TIMEOUT) -> HostInstance:
        """Start the process and return once it says it is ready (all its triggers run)."""
        offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as output:
            self._process = subprocess.Popen(
                self._command,
                cwd=self._cwd,
                env=self._environ,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C reaches it through the stack, not directly
            )
        self.starts += 1
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if READY_LINE in self._output_since(offset):
                return self
            if self._process.poll() is not None:
                raise InstanceFailed(
                    f"Host instance {self.number} exited with {self._process.returncode} "
                    f"before it was ready: see {self.log}"
                )
            time.sleep(0.2)
        self.kill()
        raise InstanceFailed(f"Host instance {self.number} was not ready in {timeout:.0f} s: "
                             f"see {self.log}")  # fmt: skip

    def _output_since(self, offset: int) -> str:
        with self.log.open("rb") as output:
            output.seek(offset)
            return output.read().decode("utf-8", "replace")

    def kill(self) -> None:
        """SIGKILL: the process ends at once, whatever it holds (locks run out at the broker)."""
        if self.running():
            assert self._process is not None
            self._process.send_signal(signal.SIGKILL)
            self._process.wait(10)

    def stop(self, timeout: float = _STOP_TIMEOUT) -> None:
        """SIGTERM: the host lets its invocations in flight finish, then exits."""
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()


class HostInstances:
    """Instances 2..N of a stack (the first runs in the stack's own process), each restarted
    when its process dies while the stack runs."""

    def __init__(
        self,
        count: int,
        *,
        settings: Mapping[str, str],
        host_json: Mapping[str, Any],
        logs: Path,
        settings_file: Path,
    ) -> None:
        host_json_file = logs / "instances-host.json"
        host_json_file.write_text(json.dumps(host_json, indent=2))
        environ = {**os.environ, **settings}
        self.instances = [
            HostInstance(
                number,
                environ=environ,
                host_json=host_json_file,
                log=logs / f"host-{number}.log",
                settings_file=settings_file,
            )
            for number in range(2, count + 1)
        ]
        self._stopping = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="host instances", daemon=True)

    def start(self) -> HostInstances:
        try:
            for instance in self.instances:
                instance.start()
        except BaseException:
            self.stop()
            raise
        self._watcher.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._watcher.is_alive():
            self._watcher.join()
        for instance in self.instances:
            instance.stop()

    def _watch(self) -> None:
        while not self._stopping.wait(_WATCH_SECONDS):
            for instance in self.instances:
                if self._stopping.is_set() or instance.running():
                    continue
                logger.warning("Host instance %d ended: starting it again", instance.number)
                try:
                    instance.start()
                except InstanceFailed as error:
                    logger.error("%s", error)
