"""The app's language worker: Microsoft's library worker ``azure-functions-runtime``, run in this
process and driven with the Functions RPC protocol's messages, as the Functions host's Python
proxy worker drives it in Azure (Python 3.13+).

The host sends a ``WorkerInitRequest`` (the worker indexes ``function_app.py``), a
``FunctionsMetadataRequest`` (the functions and their bindings, as the worker indexed them), a
``FunctionLoadRequest`` per function it runs, then an ``InvocationRequest`` per invocation. A
later host in the same process sends a ``FunctionEnvironmentReloadRequest`` instead of the
init, as the Functions host does when it specializes a running worker: the worker takes the new
environment and indexes again.

The runtime keeps its state in module globals, as a worker process does: one app per process,
and one host at a time. The runtime's coroutines run on one event loop thread; synchronous
functions run in the runtime's own thread pool (``PYTHON_THREADPOOL_THREAD_COUNT``).
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import uuid
from collections.abc import Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import azure_functions_runtime as runtime

from .config import HostConfigurationError
from .rpc import messages, protos

# The Functions host starts its workers with the largest gRPC message size .NET allows.
GRPC_MAX_MESSAGE_LENGTH = 2**31 - 1
SCRIPT_FILE_SETTING = "PYTHON_SCRIPT_FILE_NAME"
_HOST_VERSION = "4.1040.0"  # what the worker is told the host is; it only logs it


@dataclass
class WorkerRequest:
    """What the proxy worker hands each of the runtime's coroutines."""

    name: str
    request: Any  # StreamingMessage
    properties: dict[str, Any] = field(default_factory=dict)


class WorkerStartError(HostConfigurationError):
    """The worker could not index or load the app; the message carries the worker's error."""


class Worker:
    """The runtime of this process, on its event loop thread."""

    def __init__(self) -> None:
        self.worker_id = str(uuid.uuid4())
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="functions-worker", daemon=True
        )
        self._thread.start()
        self._initialized = False
        # host.json's functionTimeout, set by the host that holds this worker (None: no limit).
        self.function_timeout: float | None = None

    def _run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def _message(self, **content: Any) -> Any:
        return messages.StreamingMessage(request_id=str(uuid.uuid4()), **content)

    def index(self, script: Path, environ: Mapping[str, str]) -> list[Any]:
        """Index the app at ``script`` (its directory is the script root) and return its
        ``RpcFunctionMetadata``. ``environ`` is the worker's environment (the app settings)."""
        directory = str(script.parent)
        _allow_indexing_again(script)
        if directory not in sys.path:
            sys.path.insert(0, directory)
        properties = {"protos": protos, "host": "127.0.0.1"}
        runtime.start_threadpool_executor()
        if not self._initialized:
            # The host starts the worker process in the script root.
            os.chdir(directory)
            request = self._message(
                worker_init_request=messages.WorkerInitRequest(
                    host_version=_HOST_VERSION,
                    function_app_directory=directory,
                    worker_directory=str(Path(runtime.__file__).parent),
                )
            )
            response = self._run(
                runtime.worker_init_request(WorkerRequest("WorkerInitRequest", request, properties))
            )
        else:
            request = self._message(
                function_environment_reload_request=messages.FunctionEnvironmentReloadRequest(
                    environment_variables=dict(environ),
                    function_app_directory=directory,
                )
            )
            response = self._run(
                runtime.function_environment_reload_request(
                    WorkerRequest("FunctionEnvironmentReloadRequest", request, properties)
                )
            )
        _raise_on_failure(response.result, f"The worker could not index {script}")
        self._initialized = True
        request = self._message(
            functions_metadata_request=messages.FunctionsMetadataRequest(
                function_app_directory=directory
            )
        )
        metadata = self._run(
            runtime.functions_metadata_request(WorkerRequest("WorkerMetadataRequest", request))
        )
        _raise_on_failure(metadata.result, f"The worker could not list the functions of {script}")
        return list(metadata.function_metadata_results)

    def load(self, functions: Iterable[Any]) -> None:
        """Send a FunctionLoadRequest for each ``RpcFunctionMetadata``."""
        for metadata in functions:
            request = self._message(
                function_load_request=messages.FunctionLoadRequest(
                    function_id=metadata.function_id, metadata=metadata
                )
            )
            response = self._run(
                runtime.function_load_request(WorkerRequest("FunctionLoadRequest", request))
            )
            _raise_on_failure(response.result, f"The worker could not load {metadata.name}")

    def invoke(self, invocation: Any) -> Any:
        """Run one ``InvocationRequest``; returns the worker's ``InvocationResponse``. Past
        ``function_timeout`` the invocation's coroutine is cancelled and ``TimeoutError``
        raised: an async function stops there, a synchronous one runs on in the runtime's
        thread pool (a thread cannot be stopped, and the worker shares this process)."""
        request = self._message(invocation_request=invocation)
        future = asyncio.run_coroutine_threadsafe(
            runtime.invocation_request(WorkerRequest("FunctionInvocationRequest", request)),
            self._loop,
        )
        try:
            return future.result(self.function_timeout)
        except TimeoutError:
            future.cancel()
            raise

    def finish(self) -> None:
        """Wait for the synchronous invocations in flight and stop the runtime's thread pool."""
        runtime.stop_threadpool_executor()


def _raise_on_failure(result: Any, what: str) -> None:
    if result.status != messages.StatusResult.Success:
        raise WorkerStartError(
            f"{what}: {result.exception.message}\n{result.exception.stack_trace}".rstrip()
        )


def _allow_indexing_again(script: Path) -> None:
    """The worker imports the script by its file name. When this process imported that module
    already (a test, or an earlier host), it must be this very file; and the FunctionApp in it,
    which refuses to list its functions twice, forgets that it did."""
    module = sys.modules.get(script.stem)
    if module is None:
        return
    loaded = getattr(module, "__file__", None)
    if loaded is None or Path(loaded).resolve() != script.resolve():
        raise HostConfigurationError(
            f"This process imported another module named {script.stem!r} ({loaded}); the worker "
            f"would take it for {script}. One app per process: run the other app's host in a "
            "process of its own."
        )
    from azure.functions import FunctionRegister

    for value in vars(module).values():
        if isinstance(value, FunctionRegister):
            value.functions_bindings = None


def point_settlement_client(address: str) -> None:
    """Point the Service Bus extension's settlement client (``ServiceBusMessageActions``, a
    process-wide singleton) at the host's Settlement service. The extension reads the host's
    address from the worker's command line (``--host``, ``--port``,
    ``--functions-grpc-max-message-length``), which the host writes when it starts a worker;
    here the worker shares the host's process, so the client is built with that command line."""
    try:
        from azurefunctions.extensions.bindings.servicebus import ServiceBusMessageActions
    except ImportError:
        return
    host, port = address.rsplit(":", 1)
    command_line = [
        "--host", host, "--port", port,
        "--functions-grpc-max-message-length", str(GRPC_MAX_MESSAGE_LENGTH),
    ]  # fmt: skip
    with _ARGV_LOCK:
        saved = sys.argv
        sys.argv = [saved[0] if saved else "worker", *command_line]
        try:
            client = ServiceBusMessageActions()
        finally:
            sys.argv = saved
    # The binding keeps one instance per process; the host's takes its place.
    from .message_actions import install_settlement_actions

    install_settlement_actions(client)


_ARGV_LOCK = threading.Lock()
_GUARD = threading.Lock()
_worker: Worker | None = None
_owner: object | None = None


def acquire(owner: object) -> Worker:
    """This process's worker, for ``owner`` (a host) alone until it calls ``release``."""
    global _worker, _owner
    with _GUARD:
        if _owner is not None and _owner is not owner:
            raise HostConfigurationError(
                "A local host is already running in this process. The worker keeps one app's "
                "state per process: stop that host first, or run this one in its own process."
            )
        if _worker is None:
            _worker = Worker()
        _owner = owner
        return _worker


def release(owner: object) -> None:
    global _owner
    with _GUARD:
        if _owner is owner:
            _owner = None
