"""``python -m localdev.demo [--log FILE] [--timeout 270]`` (``make demo``).

Runs the whole stack in this process on free ports (so it never collides with a running
``make up``), with settings chosen for a short demo; the host's own log goes to ``--log``.
Exit code 0 only when every check of the story passed.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

from localdev.azurite import AzuriteError
from localdev.stack import run_stack

from .narration import Narrator
from .story import DemoAborted, Story

# Settings for the demo (each one is documented in README's settings table): the archive timer
# runs every 3 seconds instead of every 5 minutes, and a transient failure is given up on after
# 1.5 seconds (three attempts) instead of 10 minutes, so the story fits in two minutes.
DEMO_SETTINGS = {
    "DLQ_ARCHIVE_SCHEDULE": "*/3 * * * * *",
    "TASK_RETRY_WINDOW_SECONDS": "1.5",
    "TASK_RETRY_MIN_BACKOFF_SECONDS": "0.5",
    "TASK_RETRY_MAX_BACKOFF_SECONDS": "1",
    "PAYMENT_SIMULATOR_DECLINE_TOKENS": "tok_declined",
    "PAYMENT_SIMULATOR_OUTAGE_TOKENS": "",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localdev.demo", description=__doc__)
    parser.add_argument(
        "--log",
        type=Path,
        default=Path(tempfile.gettempdir()) / "servicebus-pipelines-demo.log",
        help="where the host, the app and Spark log (default: %(default)s)",
    )
    parser.add_argument("--timeout", type=float, default=270.0, help="give up after (s)")
    args = parser.parse_args(argv)
    args.log.write_text("")
    logging.basicConfig(
        level=logging.INFO,
        format="[%(asctime)s] %(name)s %(message)s",
        filename=str(args.log),
    )
    for noisy in ("azure", "uamqp", "mail.log"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    started = time.monotonic()
    print(
        "make demo: ordered pipelines on Service Bus sessions, end to end on this machine.\n"
        f"(The host's and the app's log: {args.log})",
        flush=True,
    )
    print(
        "\n== Starting Azurite, the Service Bus emulator, the e-mail stand-in and the local host",
        flush=True,
    )
    try:
        with run_stack(
            overrides=DEMO_SETTINGS,
            announce=lambda line: print(f"   {line}", flush=True),
        ) as stack:
            print(
                f"   Functions host: {stack.api_url}/ (x-functions-key: {stack.function_key}), "
                f"{len(stack.host.functions)} functions  [{time.monotonic() - started:.0f} s]",
                flush=True,
            )
            narrator = Narrator(deadline=started + args.timeout, started=started)
            ok = Story(stack, args.log, narrator).run()
            print(
                "\n== Stopping everything the demo started (the host first lets the "
                "invocations in flight finish)",
                flush=True,
            )
    except (DemoAborted, AzuriteError) as error:
        print(f"\nThe demo stopped: {error}\nSee {args.log} for the details.", flush=True)
        return 1
    print(f"   done in {time.monotonic() - started:.0f} s.", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
