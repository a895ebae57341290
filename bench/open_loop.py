"""An open-loop load: requests sent at times fixed in advance by a schedule, whatever became of
the earlier ones, as a shop's customers arrive (``bench.latency_bench``).

A closed loop (N clients, each waiting for its answer before the next request) slows down with
the system it measures and so never sees the queue a slower system builds; here an arrival
that cannot be sent on time (every sender busy) is sent late, and its latency is counted from
its scheduled time, not from its late send (the correction for "coordinated omission").
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal

Schedule = Literal["poisson", "fixed"]
SCHEDULES: tuple[Schedule, ...] = ("poisson", "fixed")


def arrivals(rate: float, seconds: float, schedule: Schedule, seed: int) -> list[float]:
    """Offsets in seconds from the start, under ``seconds``, of the arrivals of a load of
    ``rate`` a second: ``poisson``, independent arrivals (exponential gaps of mean 1/rate, drawn
    from a generator seeded with ``seed``, so two runs with one seed get the same arrivals);
    ``fixed``, one every 1/rate seconds from 0."""
    if rate <= 0 or seconds <= 0:
        return []
    if schedule == "fixed":
        return [i / rate for i in range(math.ceil(seconds * rate)) if i / rate < seconds]
    draw, at = random.Random(seed), 0.0
    offsets: list[float] = []
    while True:
        at += draw.expovariate(rate)
        if at >= seconds:
            return offsets
        offsets.append(at)


def nearest_rank(values: Sequence[float], share: float) -> float:
    """The ``share`` percentile by nearest rank: the smallest value with at least that share of
    the values at or below it (a value that was measured, never an interpolation). ``inf``
    stands for what never completed; NaN when there are no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(math.ceil(share * len(ordered)), 1) - 1]


@dataclass
class Arrival:
    """One request of the load: when it was due and sent (``time.time()``), and what came of it."""

    index: int
    due: float
    sent: float = math.nan
    answered: float = math.nan
    job_id: str | None = None
    error: str | None = None


def run_open_loop(
    offsets: Sequence[float],
    send: Callable[[int], str],
    *,
    senders: int = 32,
    on_answer: Callable[[Arrival], None] | None = None,
) -> list[Arrival]:
    """Calls ``send(index)`` (which returns the job id) for each arrival at its offset from
    now, on a pool of ``senders`` threads, and returns once every call has returned. A call
    that raises is noted as the arrival's error; ``on_answer`` is called with each arrival once
    it is answered or has failed."""
    start_wall, start = time.time(), time.monotonic()
    load = [Arrival(index, start_wall + offset) for index, offset in enumerate(offsets)]
    lock = threading.Lock()

    def one(arrival: Arrival) -> None:
        arrival.sent = time.time()
        try:
            job_id = send(arrival.index)
        except Exception as error:
            with lock:
                arrival.error = f"{type(error).__name__}: {error}"[:200]
        else:
            with lock:
                arrival.job_id, arrival.answered = job_id, time.time()
        if on_answer is not None:
            on_answer(arrival)

    with ThreadPoolExecutor(max_workers=senders, thread_name_prefix="open-loop") as pool:
        for arrival, offset in zip(load, offsets, strict=True):
            wait = start + offset - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            pool.submit(one, arrival)
    return load
