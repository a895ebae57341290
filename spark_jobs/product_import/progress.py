"""Progress of the send, reported by the driver while the executors send.

The count comes from the job's accumulator, which grows as send tasks finish; the job cuts the
send into several tasks per core (see ``job.send_partitions``), so the count moves every few
seconds on a large import.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from types import TracebackType

log = logging.getLogger("spark_jobs.product_import")


class SendProgress:
    """Logs ``rows sent / total`` and the rate every ``every`` seconds while it is entered,
    and once more on exit."""

    def __init__(
        self,
        job_id: str,
        total: int,
        sent: Callable[[], int],
        *,
        every: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.job_id = job_id
        self.total = total
        self._sent = sent
        self._every = every
        self._clock = clock
        self._started = clock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"progress-{job_id}", daemon=True)

    def line(self) -> str:
        """``job J: 12,000 of 100,000 rows sent (12%), 5,900 rows/s``"""
        sent = self._sent()
        elapsed = max(self._clock() - self._started, 1e-9)
        share = 100 * sent // self.total if self.total else 100
        return (
            f"job {self.job_id}: {sent:,} of {self.total:,} rows sent ({share}%), "
            f"{sent / elapsed:,.0f} rows/s"
        )

    def __enter__(self) -> SendProgress:
        self._started = self._clock()
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._done.set()
        self._thread.join()
        log.info(self.line())

    def _run(self) -> None:
        while not self._done.wait(self._every):
            log.info(self.line())
