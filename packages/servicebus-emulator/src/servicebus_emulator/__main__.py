"""``python -m servicebus_emulator --config FILE [--host] [--port] [--data-dir]
[--http-port] [--idle-timeout]``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from .config import ConfigError, NamespaceConfig, load
from .connection import IDLE_TIMEOUT
from .server import CONNECTION_STRING, Emulator

log = logging.getLogger("servicebus_emulator")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m servicebus_emulator",
        description="A Docker-free Azure Service Bus emulator for the azure-servicebus SDK.",
    )
    parser.add_argument(
        "--config", required=True, help="config.json in the official emulator's format"
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    parser.add_argument(
        "--port", type=int, default=5672, help="AMQP port (default 5672; 0 = any free port)"
    )
    parser.add_argument(
        "--data-dir", type=Path, help="keep messages here across restarts (SQLite, WAL)"
    )
    parser.add_argument(
        "--http-port", type=int, default=None,
        help="status port for GET /health and GET /queues (default: a free port, printed at start)",
    )  # fmt: skip
    parser.add_argument(
        "--idle-timeout", type=float, default=IDLE_TIMEOUT,
        help="seconds a connection may stay silent; advertised in the AMQP open (default 240)",
    )  # fmt: skip
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        namespace = load(args.config)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        _run(_serve(namespace, args))
    except OSError as error:
        print(f"error: cannot listen on {args.host}:{args.port}: {error}", file=sys.stderr)
        return 1
    return 0


async def _serve(namespace: NamespaceConfig, args: argparse.Namespace) -> None:
    emulator = Emulator(namespace, args.data_dir, args.idle_timeout)
    port, http_port = await emulator.start(
        args.host, args.port, 0 if args.http_port is None else args.http_port
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    durable = f"data in {args.data_dir}" if args.data_dir else "in memory"
    log.info(
        "Service Bus emulator ready on amqp://%s:%d (%d queues, %d topics, %s); "
        "health: http://%s:%d/health",
        args.host, port, len(namespace.queues), len(namespace.topics), durable, args.host,
        http_port,
    )  # fmt: skip
    log.info("connection string: %s", CONNECTION_STRING.format(host=args.host, port=port))
    await stop.wait()
    log.info("stopping")
    await emulator.close()


def _run(main: Coroutine[Any, Any, None]) -> None:
    """On uvloop when it is installed (a faster event loop, same semantics), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
        return
    uvloop.run(main)


if __name__ == "__main__":
    sys.exit(main())
