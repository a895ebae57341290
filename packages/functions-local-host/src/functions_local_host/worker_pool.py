"""The host's worker processes, kept running as the Functions host keeps its language worker
channels (``RpcFunctionInvocationDispatcher`` in Azure/azure-functions-host,
``src/WebJobs.Script/Workers/Rpc/FunctionRegistration/``).

``FUNCTIONS_WORKER_PROCESS_COUNT`` workers (1 by default, as in Azure) each index the app and
load its functions; invocations go to them in turn (round robin, as the host's
``FunctionDispatcherLoadBalancer``).

A worker process that exits is restarted: its invocations in flight fail at once (their
triggers abandon their messages, which come back), the exit is logged with its exit code and
the last lines of the worker's stderr, and a new worker indexes the app and loads its functions.
While no worker is ready, invocations wait for one ("Delaying future invocations", as the
dispatcher's ``WorkerProcessRestarting`` state). The first restart after a crash is at once;
a worker that crashes again within a minute of its start is restarted after 1, 2, 4 ... up to
30 seconds.

``functionTimeout``: an invocation not answered within it fails with the WebJobs SDK's
message, and its worker is restarted ("A function timeout has occurred. Restarting worker
process executing invocationId ...": ``RestartWorkerWithInvocationIdAsync``), which fails the
other invocations it was running too, as in Azure.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .config import HostConfigurationError
from .rpc import messages
from .worker_channel import (
    HOST_VERSION,
    WORKER_PROCESS_COUNT_SETTING,
    EventStreams,
    WorkerGone,
    WorkerProcess,
    WorkerStartError,
    raise_on_failure,
)

logger = logging.getLogger("functions_local_host")

# A worker that exits is restarted at once; when it exits again within this long of its start,
# the next restart waits, doubling from the first delay up to the last.
_STABLE_SECONDS = 60.0
_FIRST_DELAY_SECONDS = 1.0
_MAX_DELAY_SECONDS = 30.0
# A worker whose stream ended and whose process exits within this long ended by itself.
_EXIT_GRACE_SECONDS = 1.0


@dataclass
class WorkerExit:
    """How a worker process ended."""

    code: int | None
    at: datetime
    reason: str
    stderr: list[str]

    def as_dict(self) -> dict[str, Any]:
        return {
            "exitCode": self.code,
            "at": self.at.isoformat(),
            "reason": self.reason,
            "stderr": self.stderr,
        }


@dataclass
class _Slot:
    """One of the pool's FUNCTIONS_WORKER_PROCESS_COUNT places, and the worker in it now."""

    number: int
    worker: WorkerProcess | None = None
    ready: bool = False
    started: float = 0.0
    restarts: int = 0
    # Exits in a row, each within _STABLE_SECONDS of its worker's start.
    quick_exits: int = 0
    delay: float = 0.0
    last_exit: WorkerExit | None = None
    # Set when the host ends the worker itself (a function timed out): the reason of the exit.
    ended_by_host: str | None = None
    supervisor: threading.Thread | None = field(default=None, repr=False)


class WorkerPool:
    """``count`` worker processes with the interface of the in-process ``Worker``."""

    def __init__(
        self,
        count: int,
        streams: EventStreams,
        address: str,
        *,
        function_timeout: float | None = None,
    ) -> None:
        if count < 1:
            raise HostConfigurationError(f"{WORKER_PROCESS_COUNT_SETTING} must be 1 or more")
        self.worker_id = "pool"
        self.function_timeout = function_timeout
        self._streams = streams
        self._address = address
        self._slots = [_Slot(n) for n in range(1, count + 1)]
        self._turn = itertools.count()
        self._changed = threading.Condition()
        self._stopping = threading.Event()
        self._script: Path | None = None
        self._environ: dict[str, str] = {}
        self._functions: list[Any] = []

    # -- start ---------------------------------------------------------------------------------

    def index(self, script: Path, environ: Mapping[str, str]) -> list[Any]:
        """Start every worker, have each index the app, and return the first's metadata."""
        self._script, self._environ = script, dict(environ)
        metadata: list[Any] = []
        for slot in self._slots:
            slot.worker = self._start(slot.number)
            listed = self._indexed(slot.worker)
            metadata = metadata or listed
        return metadata

    def load(self, functions: Iterable[Any]) -> None:
        """Load the functions in every worker; then the workers take invocations and are
        supervised."""
        self._functions = list(functions)
        for slot in self._slots:
            assert slot.worker is not None
            self._load(slot.worker)
        with self._changed:
            for slot in self._slots:
                slot.ready, slot.started = True, time.monotonic()
            self._changed.notify_all()
        for slot in self._slots:
            slot.supervisor = threading.Thread(
                target=self._supervise, args=(slot,), name=f"worker {slot.number} supervisor"
            )
            slot.supervisor.daemon = True
            slot.supervisor.start()

    def _start(self, number: int) -> WorkerProcess:
        assert self._script is not None
        worker = WorkerProcess(number, self._streams, self._address)
        try:
            worker.start(self._script.parent, self._environ)
        except BaseException:
            worker.stop(timeout=5)
            raise
        return worker

    def _indexed(self, worker: WorkerProcess) -> list[Any]:
        assert self._script is not None
        directory = str(self._script.parent)
        response = worker.ask(
            worker_init_request=messages.WorkerInitRequest(
                host_version=HOST_VERSION, function_app_directory=directory
            ),
        )
        raise_on_failure(response.result, f"Worker {worker.number} could not index {self._script}")
        listed = worker.ask(
            functions_metadata_request=messages.FunctionsMetadataRequest(
                function_app_directory=directory
            ),
        )
        raise_on_failure(listed.result, f"Worker {worker.number} could not list {self._script}")
        return list(listed.function_metadata_results)

    def _load(self, worker: WorkerProcess) -> None:
        for metadata in self._functions:
            response = worker.ask(
                function_load_request=messages.FunctionLoadRequest(
                    function_id=metadata.function_id, metadata=metadata
                ),
            )
            raise_on_failure(
                response.result, f"Worker {worker.number} could not load {metadata.name}"
            )

    # -- supervision ---------------------------------------------------------------------------

    def _supervise(self, slot: _Slot) -> None:
        """Wait for the slot's worker to exit; unless the host is stopping, start another."""
        while not self._stopping.is_set():
            worker = slot.worker
            assert worker is not None
            code = worker.wait()
            if self._stopping.is_set():
                return
            lived = time.monotonic() - slot.started
            reason = slot.ended_by_host or "exited"
            ended = WorkerExit(code, datetime.now(UTC), reason, worker.stderr_tail)
            slot.quick_exits = 1 if lived >= _STABLE_SECONDS else slot.quick_exits + 1
            slot.delay = (
                0.0
                if slot.quick_exits == 1
                else min(_FIRST_DELAY_SECONDS * 2 ** (slot.quick_exits - 2), _MAX_DELAY_SECONDS)
            )
            with self._changed:
                slot.ready, slot.last_exit, slot.ended_by_host = False, ended, None
                self._changed.notify_all()
            self._streams.forget(worker)
            logger.error(
                "Worker process %d (pid %s) %s with exit code %s%s; restarting it%s.%s",
                slot.number,
                worker.pid,
                "exited" if reason == "exited" else f"was ended by the host ({reason})",
                code,
                _signal_name(code),
                f" in {slot.delay:.0f} s" if slot.delay else "",
                _tail_text(ended.stderr),
            )
            replacement = self._restarted(slot)
            if replacement is None:
                return
            with self._changed:
                slot.worker, slot.ready, slot.started = replacement, True, time.monotonic()
                slot.restarts += 1
                self._changed.notify_all()
            logger.warning(
                "Worker process %d restarted (pid %s, restart %d).",
                slot.number,
                replacement.pid,
                slot.restarts,
            )

    def _restarted(self, slot: _Slot) -> WorkerProcess | None:
        """A new worker for ``slot``, indexed and loaded, after the slot's delay; tried again
        (with a longer delay) until it starts. None when the host stops first."""
        while not self._stopping.wait(slot.delay):
            try:
                worker = self._start(slot.number)
            except (WorkerStartError, OSError) as error:
                logger.error("Worker process %d could not start: %s", slot.number, error)
            else:
                try:
                    self._indexed(worker)
                    self._load(worker)
                    return worker
                except (WorkerStartError, ConnectionError, TimeoutError) as error:
                    logger.error("Worker process %d could not load the app: %s", slot.number, error)
                    worker.stop(timeout=5)
            slot.delay = min(max(slot.delay * 2, _FIRST_DELAY_SECONDS), _MAX_DELAY_SECONDS)
        return None

    def health(self) -> list[dict[str, Any]]:
        """Each worker's state: running or restarting, its pid, restarts and last exit."""
        with self._changed:
            return [
                {
                    "number": slot.number,
                    "state": "running" if slot.ready else "restarting",
                    "pid": slot.worker.pid if slot.worker is not None and slot.ready else None,
                    "restarts": slot.restarts,
                    "lastExit": slot.last_exit.as_dict() if slot.last_exit else None,
                }
                for slot in self._slots
            ]

    # -- invocations ---------------------------------------------------------------------------

    def _next_ready(self) -> tuple[_Slot, WorkerProcess] | None:
        """The next ready worker in turn, waiting while none is; None when the host stops."""
        with self._changed:
            while not self._stopping.is_set():
                ready = [slot for slot in self._slots if slot.ready and slot.worker is not None]
                if ready:
                    slot = ready[next(self._turn) % len(ready)]
                    assert slot.worker is not None
                    return slot, slot.worker
                self._changed.wait(1.0)
        return None

    def invoke(self, invocation: Any) -> Any:
        """Run one ``InvocationRequest`` on the next ready worker. A worker that exits while it
        runs fails it (one whose stream had ended before it was sent passes it on to the next
        ready worker); past ``function_timeout`` the worker is restarted and ``TimeoutError``
        raised."""
        message = messages.StreamingMessage(
            request_id=str(uuid.uuid4()), invocation_request=invocation
        )
        while (chosen := self._next_ready()) is not None:
            slot, worker = chosen
            try:
                return worker.request(
                    invocation.invocation_id, message, timeout=self.function_timeout
                )
            except WorkerGone:
                # Its stream is gone: it is ended (unless it exits by itself at once: a
                # crash ends the stream a moment before the exit is seen), and its
                # supervisor starts another.
                ended_by = None if worker.exits_within(_EXIT_GRACE_SECONDS) else "its stream ended"
                self._not_ready(slot, worker, ended_by)
                worker.kill()
            except ConnectionError as error:
                return _failed(invocation, str(error))
            except TimeoutError:
                logger.error(
                    "A function timeout has occurred. Restarting worker process executing "
                    "invocationId '%s'.",
                    invocation.invocation_id,
                )
                self._not_ready(
                    slot, worker, f"function timeout (invocation {invocation.invocation_id})"
                )
                worker.kill()
                raise
        return _failed(invocation, "the host is stopping")

    def _not_ready(self, slot: _Slot, worker: WorkerProcess, ended_by: str | None = None) -> None:
        """Take ``worker`` out of turn at once (``ended_by``: why the host ends it)."""
        with self._changed:
            if slot.worker is worker:
                slot.ready = False
                slot.ended_by_host = slot.ended_by_host or ended_by

    def finish(self) -> None:
        self._stopping.set()
        with self._changed:
            self._changed.notify_all()
        for slot in self._slots:
            if slot.worker is not None:
                slot.worker.stop()
        for slot in self._slots:
            if slot.supervisor is not None:
                slot.supervisor.join(10)


def worker_process_count(settings: Mapping[str, str]) -> int:
    given = settings.get(WORKER_PROCESS_COUNT_SETTING, "").strip() or "1"
    if not given.isdigit() or int(given) < 1:
        raise HostConfigurationError(
            f"{WORKER_PROCESS_COUNT_SETTING}={given!r}: expected a number of processes, 1 or more"
        )
    return int(given)


def _failed(invocation: Any, why: str) -> Any:
    return messages.InvocationResponse(
        invocation_id=invocation.invocation_id,
        result=messages.StatusResult(
            status=messages.StatusResult.Failure, exception=messages.RpcException(message=why)
        ),
    )


def _signal_name(code: int | None) -> str:
    if code is None or code >= 0:
        return ""
    import signal

    try:
        return f" ({signal.Signals(-code).name})"
    except ValueError:
        return ""


def _tail_text(lines: list[str]) -> str:
    if not lines:
        return " It wrote nothing to stderr."
    return " The last lines of its stderr:\n" + "\n".join(f"  {line}" for line in lines)
