"""The language worker process: ``python -m functions_local_host.language_worker --host H --port P
--workerId W --requestId R --functions-grpc-max-message-length N``, the command line the
Functions host gives a worker it starts.

It connects back to the host's gRPC server, opens the ``FunctionRpc.EventStream``, says
``StartStream`` with its worker id, and hands every request the host streams to Microsoft's
library worker (``azure-functions-runtime``) as the Functions host's Python proxy worker does in
Azure (Python 3.13+): ``WorkerInitRequest``, ``FunctionsMetadataRequest``,
``FunctionLoadRequest``, ``InvocationRequest`` (each on the runtime's event loop, invocations
concurrently), answering each on the stream with the runtime's response. ``WorkerTerminate``
ends it. The app's log records go to the host on the stream as ``RpcLog`` messages.

The Service Bus extension's settlement client reads ``--host`` and ``--port`` from this
command line: it talks to the Settlement service on the host's gRPC port, as in Azure.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import queue
import sys
import threading
from typing import Any

import grpc

EVENT_STREAM = "/AzureFunctionsRpcMessages.FunctionRpc/EventStream"
# What the worker hands the runtime's coroutine for each request, and what it answers with.
_HANDLERS = {
    "worker_init_request": ("worker_init_request", "WorkerInitRequest", "worker_init_response"),
    "functions_metadata_request": (
        "functions_metadata_request",
        "WorkerMetadataRequest",
        "function_metadata_response",
    ),
    "function_load_request": (
        "function_load_request",
        "FunctionLoadRequest",
        "function_load_response",
    ),
    "invocation_request": (
        "invocation_request",
        "FunctionInvocationRequest",
        "invocation_response",
    ),
    "function_environment_reload_request": (
        "function_environment_reload_request",
        "FunctionEnvironmentReloadRequest",
        "function_environment_reload_response",
    ),
}
_LEVELS = {
    logging.DEBUG: "Debug",
    logging.INFO: "Information",
    logging.WARNING: "Warning",
    logging.ERROR: "Error",
    logging.CRITICAL: "Critical",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m functions_local_host.language_worker")
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workerId", dest="worker_id", required=True)
    parser.add_argument("--requestId", dest="request_id", required=True)
    parser.add_argument(
        "--functions-grpc-max-message-length", dest="max_length", type=int, default=2**31 - 1
    )
    args, _ = parser.parse_known_args(argv)
    # Imported here: the worker's imports are the app's start-up time, not the parser's.
    import azure_functions_runtime as runtime

    from .rpc import messages, protos
    from .worker import WorkerRequest

    outgoing: queue.Queue[Any] = queue.Queue()
    outgoing.put(
        messages.StreamingMessage(
            request_id=args.request_id,
            start_stream=messages.StartStream(worker_id=args.worker_id),
        )
    )
    _log_to_host(outgoing, messages)
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="functions-worker", daemon=True).start()
    runtime.start_threadpool_executor()
    properties = {"protos": protos, "host": args.host}

    async def handle(message: Any, kind: str) -> Any:
        coroutine, name, answer = _HANDLERS[kind]
        if kind == "worker_init_request":
            directory = message.worker_init_request.function_app_directory
            if directory and directory not in sys.path:
                sys.path.insert(0, directory)
        response = await getattr(runtime, coroutine)(WorkerRequest(name, message, properties))
        return messages.StreamingMessage(request_id=message.request_id, **{answer: response})

    def answer(future: Any) -> None:
        try:
            outgoing.put(future.result())
        except Exception:
            logging.getLogger("functions_local_host.worker").exception(
                "A request failed in the worker"
            )

    options = [
        ("grpc.max_send_message_length", args.max_length),
        ("grpc.max_receive_message_length", args.max_length),
    ]
    with grpc.insecure_channel(f"{args.host}:{args.port}", options=options) as channel:
        stream = channel.stream_stream(
            EVENT_STREAM,
            request_serializer=messages.StreamingMessage.SerializeToString,
            response_deserializer=messages.StreamingMessage.FromString,
        )

        def requests() -> Any:
            while (message := outgoing.get()) is not None:
                yield message

        try:
            for message in stream(requests()):
                kind = message.WhichOneof("content")
                if kind == "worker_terminate":
                    break
                if kind not in _HANDLERS:
                    continue
                asyncio.run_coroutine_threadsafe(handle(message, kind), loop).add_done_callback(
                    answer
                )
        except grpc.RpcError:
            pass  # the host is gone: so is this worker
        finally:
            runtime.stop_threadpool_executor()
            outgoing.put(None)
    return 0


def _log_to_host(outgoing: queue.Queue[Any], messages: Any) -> None:
    """The app's log records (and the worker's) go to the host as ``RpcLog``, which logs them
    as the Functions host does with a worker's logs."""

    class ToHost(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.name.startswith("grpc"):
                return
            try:
                text = self.format(record)
            except Exception:
                return
            outgoing.put(
                messages.StreamingMessage(
                    rpc_log=messages.RpcLog(
                        category=record.name,
                        level=messages.RpcLog.Level.Value(
                            _LEVELS.get(record.levelno, "Information")
                        ),
                        message=text,
                    )
                )
            )

    handler = ToHost(logging.INFO)
    handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    for noisy in ("azure", "uamqp", "azure.functions"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


if __name__ == "__main__":
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
    sys.exit(main())
