"""CPU time of processes, from Linux's /proc (what the benchmarks report per row or order).

A process's CPU is its user + system time plus that of its children it has waited for; a
process tree's is the sum over the live processes in it.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of ``pid`` and of its children it has reaped (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    # After the ")" that ends the command name, field 3 (state) is index 0: utime is field
    # 14, stime 15, cutime 16, cstime 17 of proc(5).
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / CLOCK_TICKS


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found += [int(child) for child in task.read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return found


def descendants(pid: int) -> list[int]:
    """``pid`` and every live process below it."""
    tree, pending = [], [pid]
    while pending:
        current = pending.pop()
        tree.append(current)
        pending += children(current)
    return tree


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except (FileNotFoundError, ProcessLookupError):
        return ""


def cpu_by_process(
    root: int, groups: Mapping[str, Callable[[str], bool]], rest: str
) -> dict[int, tuple[str, float]]:
    """CPU seconds of each process of the tree under ``root``, with its group: a process (and
    everything below it) belongs to the first group whose test accepts its command line, else
    to ``rest``."""
    found: dict[int, tuple[str, float]] = {}

    def visit(pid: int, group: str) -> None:
        if group == rest:
            line = command_line(pid)
            group = next((name for name, test in groups.items() if test(line)), rest)
        found[pid] = (group, cpu_seconds(pid))
        for child in children(pid):
            visit(child, group)

    visit(root, rest)
    return found


def cpu_by_group(
    root: int, groups: Mapping[str, Callable[[str], bool]], rest: str
) -> dict[str, float]:
    """CPU seconds of the process tree under ``root``, summed by group (see
    ``cpu_by_process``)."""
    totals = dict.fromkeys([*groups, rest], 0.0)
    for group, seconds in cpu_by_process(root, groups, rest).values():
        totals[group] += seconds
    return totals


def tree_cpu_seconds(pids: Iterable[int]) -> float:
    return sum(cpu_seconds(pid) for root in pids for pid in descendants(root))


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0))


def machine_line(load_before: float, load_after: float) -> str:
    """What heads every benchmark's table: the figures are only comparable when the load
    average stayed well under the core count."""
    return f"{cores()} cores; load average {load_before:.1f} before, {load_after:.1f} after (1 min)"


def load_average() -> float:
    """The 1-minute load average."""
    return os.getloadavg()[0]


def cpu_times() -> tuple[int, int]:
    """The machine's CPU time so far, in clock ticks: (stolen, all). ``stolen`` is the time
    the hypervisor ran something else while this machine's CPUs wanted to run (/proc/stat's
    ``steal``): a figure measured while it grows is measured on a slower machine."""
    with open("/proc/stat") as stat:
        fields = [int(value) for value in stat.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal (guest time is inside user already)
    return fields[7] if len(fields) > 7 else 0, sum(fields[:8])


def stolen_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    """The share of the CPU time between two ``cpu_times()`` that the hypervisor took."""
    elapsed = after[1] - before[1]
    return (after[0] - before[0]) / elapsed if elapsed > 0 else 0.0


def reference_ms(repeats: int = 3) -> float:
    """The CPU milliseconds of a fixed pure-Python workload (JSON, hashing, arithmetic: what
    the stack's processes do), the least of ``repeats``: how fast this machine is at the
    moment. On a virtual machine it moves by tens of percent from one minute to the next, and
    the CPU a run measures with it."""
    lines = [{"sku": f"SKU-{n}", "quantity": n % 7, "price": n * 1.5} for n in range(200)]
    document = {"order": lines}
    least = float("inf")
    for _ in range(repeats):
        started = time.process_time()
        for n in range(40):
            text = json.dumps(document)
            hashlib.sha256(text.encode()).hexdigest()
            json.loads(text)
            sum(i * i % 7 for i in range(2_000 + n))
        least = min(least, (time.process_time() - started) * 1000)
    return least
