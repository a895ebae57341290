"""The benchmarks' pure parts: the open-loop schedule and its percentiles (bench.latency_bench),
the Markdown tables a bench prints read back, and two checkouts' figures set side by side
(bench.compare)."""

from __future__ import annotations

import itertools
import math
import statistics
import threading
import time

from bench.comparison import Side, mean, ratio, report
from bench.markdown_tables import numbers, tables
from bench.open_loop import arrivals, nearest_rank, run_open_loop
from bench.proc import cpu_times, reference_ms, stolen_share


def test_poisson_arrivals_are_the_same_for_one_seed_and_average_the_rate() -> None:
    first = arrivals(5.0, 200.0, "poisson", seed=41)
    assert first == arrivals(5.0, 200.0, "poisson", seed=41)
    assert first != arrivals(5.0, 200.0, "poisson", seed=42)
    assert all(0 < a < b < 200.0 for a, b in itertools.pairwise(first))
    assert 900 < len(first) < 1100  # 1,000 expected; 3 standard deviations is about 95
    gaps = [b - a for a, b in itertools.pairwise(first)]
    # Exponential gaps: their standard deviation is their mean (fixed gaps: none)
    assert 0.8 < statistics.stdev(gaps) / statistics.fmean(gaps) < 1.2


def test_fixed_arrivals_come_every_interval_within_the_window() -> None:
    assert arrivals(4.0, 1.0, "fixed", seed=0) == [0.0, 0.25, 0.5, 0.75]
    assert arrivals(0.0, 10.0, "fixed", seed=0) == []


def test_the_percentile_is_a_measured_value_and_counts_what_never_completed() -> None:
    values = [float(v) for v in range(1, 101)]
    assert nearest_rank(values, 0.5) == 50.0
    assert nearest_rank(values, 0.99) == 99.0
    assert nearest_rank([0.3, 0.1, 0.2], 0.99) == 0.3
    assert nearest_rank([*values[:99], math.inf], 0.99) == 99.0
    assert nearest_rank([*values[:98], math.inf, math.inf], 0.99) == math.inf
    assert math.isnan(nearest_rank([], 0.5))


def test_an_arrival_sent_late_keeps_its_due_time_and_a_failed_send_is_noted() -> None:
    # Given one sender busy for 0.2 s with each request, and arrivals due every 0.05 s
    release = threading.Event()

    def send(index: int) -> str:
        if index == 2:
            raise ConnectionError("refused")
        release.wait(0.2)
        return f"job-{index}"

    started = time.time()
    load = run_open_loop([0.0, 0.05, 0.1], send, senders=1)

    # Then each is measured from when it was due, not from when a sender was free for it
    assert [a.job_id for a in load] == ["job-0", "job-1", None]
    assert [round(a.due - started, 2) for a in load] == [0.0, 0.05, 0.1]
    assert load[1].sent - load[1].due > 0.1  # waited for the first request's sender
    assert load[2].error == "ConnectionError: refused"


OLD = """2 cores; load average 0.5 before, 0.9 after (1 min)

| session slots | instances | orders/s | latency p50 / p95 (s) | mailed | old column |
|---|---|---|---|---|---|
| 8 (host.json as shipped) | 1 | **4.00** | 1.00 / 2.00 | 200 of 200 | 7 |
| 1 | 1 | 1.00 | n/a | 200 of 200 | 7 |

- a summary line

| instances | rows/s |
|---|---|
| 1 | 1,000 |
"""

NEW = """| session slots | instances | orders/s | latency p50 / p95 (s) | mailed | CPU share |
|---|---|---|---|---|---|
| 12 (host.json as shipped) | 1 | **5.00** | 0.90 / 2.40 | 200 of 200 | 82% |
| 1 | 1 | 1.02 | 9.00 / 9.50 | 200 of 200 | 17% |
"""


def test_the_tables_a_bench_prints_are_read_back_with_their_figures() -> None:
    found = tables(OLD)
    assert [t.name for t in found] == ["session slots", "instances"]
    assert found[0].cell(0, "orders/s") == "**4.00**"
    assert found[0].cell(1, "latency p50 / p95 (s)") == "n/a"
    assert found[0].cell(2, "orders/s") is None
    assert found[1].cell(0, "rows/s") == "1,000"
    assert numbers("**8.35**") == ([8.35], "#")
    assert numbers("5,000 of 5,000") == ([5000.0, 5000.0], "# of #")
    assert numbers("22.32, 1.14, 8.77") == ([22.32, 1.14, 8.77], "#, #, #")
    assert numbers("82%") == ([82.0], "#%")


def test_figures_are_averaged_over_the_runs_and_compared_number_by_number() -> None:
    assert mean(["4.00", "5.00"]) == "4.50"
    assert mean(["1.00 / 2.00", "2.00 / 3.00"]) == "1.50 / 2.50"
    assert mean(["1.00", "n/a"]) == ""
    assert ratio(["4.00"], ["4.10"]) == "1.02"
    assert ratio(["1.00 / 2.00"], ["0.90 / 2.40"]) == "**0.90 / 1.20**"  # moved by over 5%
    assert ratio(["80%"], ["82%"]) == "1.02"
    assert ratio(["n/a"], ["9.00 / 9.50"]) == "n/a"


def test_the_report_matches_tables_rows_and_columns_and_names_what_one_side_lacks() -> None:
    text = report(Side("old", [tables(OLD), tables(OLD)]), Side("new", [tables(NEW), tables(NEW)]))
    assert "**session slots**, row 1: 8 (host.json as shipped) / 12 (host.json as shipped)" in text
    assert "| orders/s | **4.00**; **4.00** | 4.00 | **5.00**; **5.00** | 5.00 | **1.25** |" in text
    assert "| orders/s | 1.00; 1.00 | 1.00 | 1.02; 1.02 | 1.02 | 1.02 |" in text
    assert "| instances | 1 | | 1 | | same |" in text
    assert "| CPU share (new only) |  |  | 82%; 82% | 82% | |" in text
    assert "| old column (old only) | 7; 7 | 7 |  |  | |" in text
    latency = "| latency p50 / p95 (s) | n/a; n/a |  | 9.00 / 9.50; 9.00 / 9.50 | 9.00 / 9.50 |"
    assert latency + " n/a |" in text
    assert "**instances**: 1" in text  # a table only the old side printed
    assert "| rows/s (old only) | 1,000; 1,000 | 1,000 |  |  | |" in text


def test_the_stolen_share_is_the_steal_ticks_over_all_ticks_between_two_readings() -> None:
    assert stolen_share((10, 1000), (60, 2000)) == 0.05
    assert stolen_share((10, 1000), (10, 1000)) == 0.0  # no time passed
    stolen, total = cpu_times()  # this machine's /proc/stat
    assert 0 <= stolen <= total and total > 0


def test_the_reference_workload_measures_cpu_time_in_this_process() -> None:
    assert 0 < reference_ms(repeats=1) < 10_000
