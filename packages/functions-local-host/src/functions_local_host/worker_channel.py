"""Language workers in processes of their own, as the Functions host runs them: the host serves
``FunctionRpc.EventStream`` on its gRPC server (the one that serves the Service Bus extension's
Settlement service, as in Azure), starts each worker with ``--host``, ``--port``,
``--workerId``, ``--requestId`` and ``--functions-grpc-max-message-length``
(``language_worker.py``), and the worker connects back and opens the stream with
``StartStream``. Requests and responses then go over that stream: the init, the metadata and
each load answered by request id, each invocation by invocation id.

A ``WorkerProcess`` is one worker and its stream; ``worker_pool.py`` keeps
``FUNCTIONS_WORKER_PROCESS_COUNT`` of them running. The worker's stderr goes on to the host's,
and its last lines are kept for the log of its exit.
"""

from __future__ import annotations

import collections
import logging
import os
import queue
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import IO, Any

import grpc

from .config import HostConfigurationError
from .rpc import messages

logger = logging.getLogger("functions_local_host")

WORKER_PROCESS_COUNT_SETTING = "FUNCTIONS_WORKER_PROCESS_COUNT"
GRPC_MAX_MESSAGE_LENGTH = 2**31 - 1
_SERVICE = "AzureFunctionsRpcMessages.FunctionRpc"
HOST_VERSION = "4.1040.0"
_START_SECONDS = 120.0
_REQUEST_SECONDS = 120.0
# The lines of a worker's stderr kept for the log of its exit.
STDERR_TAIL_LINES = 20
_RPC_LEVELS = {
    "Trace": logging.DEBUG,
    "Debug": logging.DEBUG,
    "Information": logging.INFO,
    "Warning": logging.WARNING,
    "Error": logging.ERROR,
    "Critical": logging.CRITICAL,
}


class WorkerStartError(HostConfigurationError):
    """A worker process could not start, index or load the app."""


class WorkerGone(ConnectionError):
    """The worker's stream had ended before the request was sent: the worker never saw it."""


class EventStreams:
    """The host's ``FunctionRpc`` service: each worker's stream, found by its worker id."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._expected: dict[str, WorkerProcess] = {}

    def handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(
            _SERVICE,
            {
                "EventStream": grpc.stream_stream_rpc_method_handler(
                    self._event_stream,
                    request_deserializer=messages.StreamingMessage.FromString,
                    response_serializer=messages.StreamingMessage.SerializeToString,
                )
            },
        )

    def expect(self, worker: WorkerProcess) -> None:
        with self._guard:
            self._expected[worker.worker_id] = worker

    def forget(self, worker: WorkerProcess) -> None:
        with self._guard:
            self._expected.pop(worker.worker_id, None)

    def _event_stream(self, requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
        first = next(requests, None)
        if first is None or first.WhichOneof("content") != "start_stream":
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "StartStream comes first")
            return
        with self._guard:
            worker = self._expected.get(first.start_stream.worker_id)
        if worker is None:
            context.abort(grpc.StatusCode.NOT_FOUND, "no worker expected with that id")
            return
        reader = threading.Thread(
            target=worker.read, args=(requests,), name=f"worker {worker.number} stream", daemon=True
        )
        reader.start()
        worker.connected.set()
        yield from worker.outgoing()


class WorkerProcess:
    """One language worker process and its stream."""

    def __init__(self, number: int, streams: EventStreams, address: str) -> None:
        self.number = number
        self.worker_id = str(uuid.uuid4())
        self._streams = streams
        self._address = address
        self._outgoing: queue.Queue[Any] = queue.Queue()
        self._pending: dict[str, Future[Any]] = {}
        self._guard = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self.connected = threading.Event()
        self._closed = False
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def stderr_tail(self) -> list[str]:
        """The last lines the worker wrote to stderr."""
        return list(self._stderr_tail)

    def start(self, script_root: Path, environ: Mapping[str, str]) -> None:
        host, port = self._address.rsplit(":", 1)
        self._streams.expect(self)
        command = [
            sys.executable, "-m", "functions_local_host.language_worker",
            "--host", host, "--port", port,
            "--workerId", self.worker_id, "--requestId", str(uuid.uuid4()),
            "--functions-grpc-max-message-length", str(GRPC_MAX_MESSAGE_LENGTH),
        ]  # fmt: skip
        self._process = subprocess.Popen(
            command,
            cwd=script_root,  # the host starts a worker in the script root
            env={**environ, "PYTHONPATH": _python_path(environ)},
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            # A Ctrl-C in the host's terminal is the host's to handle: it lets the invocations
            # in flight finish, then terminates its workers over the stream.
            start_new_session=True,
        )
        assert self._process.stderr is not None
        threading.Thread(
            target=self._pump_stderr,
            args=(self._process.stderr,),
            name=f"worker {self.number} stderr",
            daemon=True,
        ).start()
        waited = 0.0
        while not self.connected.wait(0.2):
            waited += 0.2
            if self._process.poll() is not None or waited > _START_SECONDS:
                raise WorkerStartError(
                    f"Worker process {self.number} did not connect to the host (exit code "
                    f"{self._process.poll()})."
                )

    def _pump_stderr(self, stream: IO[bytes]) -> None:
        """The worker's stderr, line by line, to the host's stderr (as when it was inherited),
        keeping the last lines."""
        for line in iter(stream.readline, b""):
            text = line.decode(errors="replace").rstrip("\n")
            self._stderr_tail.append(text)
            try:
                sys.stderr.write(text + "\n")
                sys.stderr.flush()
            except (OSError, ValueError):  # the host's stderr is closed
                pass
        stream.close()

    def wait(self) -> int | None:
        """Wait for the process to exit; its exit code (negative: the signal that ended it)."""
        return None if self._process is None else self._process.wait()

    def exits_within(self, seconds: float) -> bool:
        """Whether the process has exited, or exits within ``seconds``. Its supervisor's
        ``wait`` holds the process's wait lock (``poll`` answers None meanwhile), so this
        watches the exit code that wait sets as well."""
        if self._process is None:
            return False
        deadline = time.monotonic() + seconds
        while self._process.returncode is None and self._process.poll() is None:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    def kill(self) -> None:
        """End the process at once (the host restarts a worker whose function timed out)."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()

    def outgoing(self) -> Iterator[Any]:
        while (message := self._outgoing.get()) is not None:
            yield message

    def read(self, responses: Iterator[Any]) -> None:
        """The worker's side of the stream: responses resolve their requests, logs are logged."""
        try:
            for message in responses:
                kind = message.WhichOneof("content")
                if kind == "rpc_log":
                    log = message.rpc_log
                    logging.getLogger(log.category or "Function").log(
                        _RPC_LEVELS.get(messages.RpcLog.Level.Name(log.level), logging.INFO),
                        "%s",
                        log.message,
                    )
                    continue
                key = (
                    message.invocation_response.invocation_id
                    if kind == "invocation_response"
                    else message.request_id
                )
                with self._guard:
                    future = self._pending.pop(key, None)
                if future is not None:
                    future.set_result(getattr(message, kind))
        except grpc.RpcError:
            pass
        finally:
            self._fail_pending(f"worker process {self.number} exited")
            self._outgoing.put(None)  # ends the stream's sending side, freeing its thread

    def _fail_pending(self, why: str) -> None:
        with self._guard:
            self._closed = True
            pending, self._pending = self._pending, {}
        for future in pending.values():
            future.set_exception(ConnectionError(why))

    def request(self, key: str, message: Any, timeout: float | None = _REQUEST_SECONDS) -> Any:
        """Send ``message`` and wait for the response under ``key``. Raises ``ConnectionError``
        when the worker exits first, ``TimeoutError`` after ``timeout`` seconds."""
        future: Future[Any] = Future()
        with self._guard:
            if self._closed:
                raise WorkerGone(f"worker process {self.number} exited")
            self._pending[key] = future
        self._outgoing.put(message)
        try:
            return future.result(timeout)
        finally:
            with self._guard:
                self._pending.pop(key, None)

    def ask(self, **content: Any) -> Any:
        """Send one request (``content``: the ``StreamingMessage`` field that holds it) under a
        new request id and return the worker's response to it."""
        request_id = str(uuid.uuid4())
        return self.request(request_id, messages.StreamingMessage(request_id=request_id, **content))

    def stop(self, timeout: float = 10.0) -> None:
        self._outgoing.put(messages.StreamingMessage(worker_terminate=messages.WorkerTerminate()))
        self._outgoing.put(None)
        self._streams.forget(self)
        if self._process is not None:
            try:
                self._process.wait(timeout)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(5)


def _python_path(environ: Mapping[str, str]) -> str:
    """The worker imports this package from where the host imported it, wherever it starts."""
    root = str(Path(__file__).resolve().parents[1])
    existing = environ.get("PYTHONPATH") or os.environ.get("PYTHONPATH", "")
    return os.pathsep.join(p for p in (root, existing) if p)


def raise_on_failure(result: Any, what: str) -> None:
    if result.status != messages.StatusResult.Success:
        raise WorkerStartError(
            f"{what}: {result.exception.message}\n{result.exception.stack_trace}".rstrip()
        )
