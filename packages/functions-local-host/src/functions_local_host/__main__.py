"""``python -m functions_local_host [--port 7071] [--settings local.settings.json]``: run the
function app in the current folder (function_app.py, host.json, local.settings.json) like
``func start`` until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from .config import apply_settings, load_host_json, load_settings
from .host import LocalHost


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m functions_local_host", description=__doc__)
    parser.add_argument("--port", type=int, default=7071, help="HTTP port (default 7071)")
    parser.add_argument(
        "--settings",
        type=Path,
        default=Path("local.settings.json"),
        help="local.settings.json (its .example is used when it is absent)",
    )
    parser.add_argument("--host-json", type=Path, default=Path("host.json"))
    parser.add_argument(
        "--app",
        type=Path,
        default=Path("function_app.py"),
        help="the app's script (default function_app.py); its folder is the script root",
    )
    parser.add_argument(
        "--functions", nargs="+", help="run only these functions (like func start --functions)"
    )
    parser.add_argument("--drain-timeout", type=float, default=30.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(message)s", stream=sys.stdout)
    logging.getLogger("azure").setLevel(logging.WARNING)
    logging.getLogger("uamqp").setLevel(logging.WARNING)
    logging.getLogger("azure.functions").setLevel(logging.WARNING)  # the worker's own lines
    run(
        args.app,
        args.settings,
        args.host_json,
        port=args.port,
        drain=args.drain_timeout,
        functions=args.functions,
    )
    return 0


def run(
    app: Path,
    settings: Path,
    host_json: Path,
    *,
    port: int,
    drain: float,
    functions: list[str] | None = None,
) -> None:
    """Load the settings into the environment (what is already set wins), run the app until
    SIGINT/SIGTERM, then stop gracefully."""
    apply_settings(load_settings(settings))
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    host = LocalHost(
        app,
        dict(os.environ),
        load_host_json(host_json),
        http_port=port,
        drain_timeout=drain,
        functions=functions,
    )
    host.start()
    if any(spec.trigger_type == "httpTrigger" for spec in host.functions):
        print(
            f"Function keys: x-functions-key: {host.function_keys.host} (host key), "
            f"master key {host.function_keys.master}",
            flush=True,
        )
    print("Host started. Press Ctrl+C to shut down.", flush=True)
    try:
        stop.wait()
    finally:
        print("Shutting down: finishing the invocations in flight...", flush=True)
        host.stop()
        print("Stopped.", flush=True)


if __name__ == "__main__":
    sys.exit(main())
