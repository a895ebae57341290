"""The local stack for a benchmark, in a process of its own, so that its CPU time is the
stack's alone: ``python -m bench.stack_process [--max-concurrent-sessions N] [--instances N]``.

It starts what ``make up`` starts, through ``localdev.stack.run_stack`` (Azurite, the Service
Bus emulator, the SMTP sink and the local host running function_app.py), with host.json as
shipped (or with only ``maxConcurrentSessions`` changed) and the shipped example settings, on
free ports; with ``--instances N``, N instances of the app (the 2nd and later are child
processes of this one, so their CPU is counted with the host's). On stdout, one JSON line per event:

- ``{"ready": {...}}``: the API URL and key, the connection strings, the emulator's status
  URL, this process's pid;
- ``{"mail": "<Message-ID>", "time": <time.time()>}`` for each e-mail the sink received
  (noted as it arrives).

It stops everything when its stdin closes (the benchmark ends or dies).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
import time
from typing import Any

from functions_local_host.config import load_host_json
from localdev.stack import run_stack
from localdev.stack_layout import HOST_JSON, REPO_ROOT

SETTINGS_EXAMPLE = REPO_ROOT / "local.settings.json.example"


def host_json(max_concurrent_sessions: int | None) -> dict[str, Any]:
    document = load_host_json(HOST_JSON)
    if max_concurrent_sessions is not None:
        document["extensions"]["serviceBus"]["maxConcurrentSessions"] = max_concurrent_sessions
    return document


def emit(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.stack_process")
    parser.add_argument("--max-concurrent-sessions", type=int, default=None)
    parser.add_argument(
        "--instances", type=int, default=1, help="instances of the app (localdev.stack)"
    )
    parser.add_argument("--log", default=os.devnull, help="the host's and the app's log")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, filename=args.log)
    for noisy in ("azure", "uamqp", "mail.log", "servicebus_emulator"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    with run_stack(
        settings_file=SETTINGS_EXAMPLE,
        host_json=host_json(args.max_concurrent_sessions),
        instances=args.instances,
    ) as stack:
        emit(
            {
                "ready": {
                    "api_url": stack.api_url,
                    "key": stack.function_key,
                    "storage": stack.storage_connection_string,
                    "servicebus": stack.servicebus_connection_string,
                    "servicebus_status": stack.emulator.http_url,
                    "pid": os.getpid(),
                }
            }
        )
        stop = threading.Event()

        def watch_mail() -> None:
            seen = 0
            while not stop.is_set():
                if not stack.email.wait_for_more(seen, timeout=0.5):
                    continue
                arrived = time.time()
                message_ids = stack.email.message_ids(seen)
                for message_id in message_ids:
                    emit({"mail": message_id, "time": arrived})
                seen += len(message_ids)

        watcher = threading.Thread(target=watch_mail, name="mail-watcher", daemon=True)
        watcher.start()
        sys.stdin.read()  # until the benchmark closes it
        stop.set()
        watcher.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
