"""Run pytest several times on a deliberately loaded machine and list every test that failed in
any run: how a test that fails only when the machine is busy is found (``make flaky``).

    python tools/flaky.py --runs 2 --load 2 -- packages/functions-local-host/tests -n 2

``--load N`` starts N processes that each spin one core for the whole session, beside the
test runs; they are stopped when the runs end, however they end. Each run writes a JUnit XML
report to a temporary folder; the union of the failures (and errors) is printed with the runs
that saw each one. The exit status is 1 when any test failed in any run, else 0.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# One core's worth of busy work, until the parent stops it (or dies: the hog checks its parent).
HOG = """
import os
parent = os.getppid()
while os.getppid() == parent:
    for _ in range(10**6):
        pass
"""


@contextmanager
def hogs(count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    started = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(count)]
    try:
        yield started
    finally:
        for hog in started:
            hog.kill()
        for hog in started:
            hog.wait()


def failures(report: Path) -> list[str]:
    """The tests (dotted module path::name) that failed or errored in one JUnit XML report."""
    if not report.exists():
        return []
    found = []
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            # classname is the module's dotted path (and the class, for a method).
            found.append(f"{case.get('classname')}::{case.get('name')}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="how many times to run pytest")
    parser.add_argument("--load", type=int, default=2, help="CPU hogs beside the runs")
    parser.add_argument("pytest_args", nargs="*", help="after --: pytest's arguments")
    args = parser.parse_args(argv)

    seen: dict[str, list[int]] = {}
    statuses: list[int] = []
    with tempfile.TemporaryDirectory(prefix="flaky-") as tmp, hogs(args.load):
        for run in range(1, args.runs + 1):
            report = Path(tmp) / f"run-{run}.xml"
            load = os.getloadavg()[0]
            print(
                f"==> run {run} of {args.runs}: {args.load} CPU hogs on {os.cpu_count()} cores, "
                f"load average {load:.1f}: pytest {' '.join(args.pytest_args)}",
                flush=True,
            )
            started = time.monotonic()
            command = [sys.executable, "-m", "pytest", f"--junitxml={report}", *args.pytest_args]
            status = subprocess.call(command)
            statuses.append(status)
            failed = failures(report)
            print(
                f"==> run {run}: exit {status}, {len(failed)} failed, "
                f"{time.monotonic() - started:.0f} s",
                flush=True,
            )
            for test in failed:
                seen.setdefault(test, []).append(run)

    print(f"\n==> failed in any of {args.runs} runs under {args.load} CPU hogs: {len(seen)}")
    for test, runs in sorted(seen.items()):
        print(f"{test}  (run {', '.join(map(str, runs))})")
    # A run can fail without a failed test (a collection error, an interrupted session).
    return 1 if seen or any(status not in (0, 5) for status in statuses) else 0


if __name__ == "__main__":
    sys.exit(main())
