"""A fault-injection point for the crash tests, off unless FAULT_HOLD_AFTER_RECEIPT_SENT
names a folder: it holds a receipt at the worst moment for a crash, after the mail service
has carried the send out and before anything (the receipt's record, the session state)
records it, so that a test can kill the process there.

Only a process the test armed holds (a file ``arm-<pid>`` in the folder), and each job at most
once across processes (``held-<job>``, created exclusively, holds the pid): the instance a test
starts again, or another one, then runs the same task to its end."""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger(__name__)

HOLD_SECONDS = 300.0  # long enough for any test to kill it; never forever


def hold_after_receipt_sent(folder: str) -> Callable[[str], None]:
    where = Path(folder)

    def hold(job_id: str) -> None:
        pid = os.getpid()
        if not (where / f"arm-{pid}").exists():
            return
        name = hashlib.sha256(job_id.encode()).hexdigest()[:32]
        try:
            marker = os.open(where / f"held-{name}", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        with os.fdopen(marker, "w") as held:
            held.write(f"{pid} {job_id}\n")
        logger.warning("Holding the receipt of %s after its send (fault injection)", job_id)
        time.sleep(HOLD_SECONDS)

    return hold
