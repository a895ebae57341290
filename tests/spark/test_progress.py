"""The send's progress as the driver logs it: rows sent of the total, and the rate."""

from __future__ import annotations

import logging
import threading

from spark_jobs.product_import.progress import SendProgress


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_line_says_rows_sent_of_the_total_the_share_and_the_rate() -> None:
    clock, sent = Clock(), [0]
    progress = SendProgress("cat-1", 3000, lambda: sent[0], clock=clock)
    sent[0], clock.now = 1500, 102.0

    assert progress.line() == "job cat-1: 1,500 of 3,000 rows sent (50%), 750 rows/s"


def test_lines_are_logged_while_it_runs_and_once_at_the_end(caplog) -> None:
    caplog.set_level(logging.INFO, logger="spark_jobs.product_import")
    asked = threading.Event()
    sent = [0]

    def count() -> int:
        value = sent[0]
        asked.set()
        return value

    with SendProgress("cat-2", 10, count, every=0.01):
        assert asked.wait(timeout=30)  # the reporting thread asked for the count
        sent[0] = 10

    assert any("job cat-2: 0 of 10 rows sent (0%)" in m for m in caplog.messages)
    assert "job cat-2: 10 of 10 rows sent (100%)" in caplog.messages[-1]
