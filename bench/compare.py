"""One benchmark on the previous release and on the working tree, side by side in one run.

``.venv/bin/python -m bench.compare [--base COMMIT] [--rounds 3] -- bench.pipeline_bench
--orders 200 --import-rows 0``

The previous release (the commit ``tests/upgrade/previous-release`` names, or ``--base``) is
checked out as a ``git worktree`` in a temporary folder (``localdev.releases``, as the upgrade
test does), with this checkout's ``node_modules`` linked into it (Azurite is pinned in
package-lock.json) and its Python: this venv when its ``requirements.txt`` is this one's, else
a venv of its own with its requirements and this checkout's dev tools (the local host, the
emulator). Both run on this checkout's local host and emulator, as both releases run on
Azure's. Then the command runs ``--rounds`` times on each, interleaved (old, new, old, new,
...), one after another, each run starting its own stacks as the bench does; the output of
each run, and its stderr, are kept in ``--logs``.

It prints, in Markdown ready for bench/README.md: the command, both commits, the core count,
each run's wall time, the load average (1 min) before and after it and the share of the
machine's CPU time the hypervisor took during it (steal), the CPU time of a fixed reference
workload just before and after it (how fast the machine was), then every figure of
every table the bench printed, per run, as a mean on each side and as new / old
(``bench.comparison``).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.comparison import Side, report
from bench.markdown_tables import Table, tables
from bench.proc import cores, cpu_times, reference_ms, stolen_share
from localdev.releases import previous_commit, release
from localdev.stack_layout import REPO_ROOT


@dataclass(frozen=True)
class Checkout:
    side: str  # "old" or "new"
    tree: Path
    python: str
    label: str  # which commit, for the report


@dataclass(frozen=True)
class Run:
    checkout: Checkout
    round: int
    seconds: float
    load_average: tuple[float, float]
    returncode: int
    tables: list[Table]
    stolen: float = 0.0  # the share of the machine's CPU time the hypervisor took meanwhile
    reference: tuple[float, float] = (0.0, 0.0)  # reference_ms() before and after


def run_once(
    checkout: Checkout, command: list[str], number: int, logs: Path, timeout: float
) -> Run:
    """The command on ``checkout`` (its tree the working directory, so its ``bench`` and
    app are the ones imported), its stdout and stderr kept in ``logs``."""
    stem = logs / f"round-{number}-{checkout.side}"
    print(
        f"-- round {number}, {checkout.side}: {checkout.label}; output {stem}.out", file=sys.stderr
    )
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    reference_before = reference_ms()
    load_before, started, times = os.getloadavg()[0], time.monotonic(), cpu_times()
    with open(f"{stem}.out", "w") as out, open(f"{stem}.err", "w") as err:
        process = subprocess.Popen(
            [checkout.python, "-m", *command], cwd=checkout.tree, env=environ,
            stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True,
        )  # fmt: skip
        try:
            returncode = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            print(f"   past --timeout ({timeout:.0f} s): ended", file=sys.stderr)
            _stop(process)
            returncode = process.returncode if process.returncode is not None else -1
        except BaseException:  # ^C: its processes end with it
            _stop(process)
            raise
    seconds = time.monotonic() - started
    if returncode != 0:
        print(f"   exit code {returncode}: see {stem}.err", file=sys.stderr)
    text = Path(f"{stem}.out").read_text(errors="replace")
    return Run(
        checkout,
        number,
        seconds,
        (load_before, os.getloadavg()[0]),
        returncode,
        tables(text),
        stolen_share(times, cpu_times()),
        (reference_before, reference_ms()),
    )


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Ends the run's process group (the bench and the stacks it started), SIGTERM first."""
    for sent in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sent)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=30)
            return
        except subprocess.TimeoutExpired:
            continue


def link_node_modules(tree: Path) -> str:
    """This checkout's node_modules in ``tree``; a note for the report when its
    package-lock.json differs from this one's."""
    link = tree / "node_modules"
    if not link.exists():
        link.symlink_to(REPO_ROOT / "node_modules", target_is_directory=True)
    same = (tree / "package-lock.json").read_bytes() == (
        REPO_ROOT / "package-lock.json"
    ).read_bytes()
    return (
        ""
        if same
        else " (its package-lock.json differs from this checkout's: Azurite is this one's)"
    )


def working_tree_label() -> str:
    head = _git("rev-parse", "--short", "HEAD").strip()
    dirty = " with uncommitted changes" if _git("status", "--porcelain").strip() else ""
    return f"working tree ({head}{dirty})"


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, check=True
    ).stdout


def runs_table(runs: list[Run]) -> str:
    lines = [
        "| round | checkout | wall time (s) | load average before / after (1 min) "
        "| CPU time stolen by the hypervisor | reference workload before / after (CPU ms) "
        "| exit code |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        lines.append(
            f"| {run.round} | {run.checkout.label} | {run.seconds:.0f} | "
            f"{run.load_average[0]:.1f} / {run.load_average[1]:.1f} | {run.stolen:.1%} | "
            f"{run.reference[0]:.0f} / {run.reference[1]:.0f} | {run.returncode} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__)
    parser.add_argument("--base", default=None, help="the old side's commit (default: the "
                        "previous release, tests/upgrade/previous-release)")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=3, help="runs on each side, interleaved")
    parser.add_argument("--timeout", type=float, default=3600.0, help="per run, seconds")
    parser.add_argument("--logs", default=None, help="where each run's output goes")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- bench.<name> [args]")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or not command[0].startswith("bench."):
        parser.error("give the bench after --, e.g. -- bench.pipeline_bench --orders 50")
    if not 1 <= args.rounds <= 10:
        parser.error("--rounds must be 1 to 10")
    base = args.base or previous_commit()
    logs = Path(args.logs or tempfile.mkdtemp(prefix="bench-compare-"))
    logs.mkdir(parents=True, exist_ok=True)
    print(f"Each run's output: {logs}", file=sys.stderr)
    load_start = os.getloadavg()[0]

    with (
        tempfile.TemporaryDirectory(prefix="bench-compare-") as folder,
        release(base, Path(folder), with_dev_tools=True) as old_release,
    ):
        module = old_release.tree / (command[0].replace(".", "/") + ".py")
        if not module.exists():
            parser.error(f"{base} has no {command[0]}: compare a bench both checkouts have")
        note = link_node_modules(old_release.tree)
        python = "this venv" if old_release.python == sys.executable else "a venv of its own"
        old = Checkout("old", old_release.tree, old_release.python, f"old ({base[:7]})")
        new = Checkout("new", REPO_ROOT, sys.executable, "new")
        new_label = working_tree_label()
        try:
            runs = [
                run_once(checkout, command, number, logs, args.timeout)
                for number in range(1, args.rounds + 1)
                for checkout in (old, new)
            ]
        finally:  # the link goes before the checkout is removed, never what it points to
            if (old_release.tree / "node_modules").is_symlink():
                (old_release.tree / "node_modules").unlink()
    load_end = os.getloadavg()[0]

    print(f"`python -m {' '.join(command)}`, {args.rounds} round(s), interleaved (old, new).\n")
    print(f"- old: {old_release.commit[:7]}{' (the previous release)' if not args.base else ''}, "
          f"with {python}{note}")  # fmt: skip
    print(f"- new: the {new_label}")
    print(f"- {cores()} cores; load average {load_start:.1f} at the start, {load_end:.1f} at "
          "the end (1 min)\n")  # fmt: skip
    print(runs_table(runs) + "\n")
    print(
        "Each figure of each table the bench printed: its value in each run (in round order), "
        "the mean of each side, and new / old, number by number (bold: one moved by more than "
        "5% either way; same: one value in every run).\n"
    )
    print(
        report(
            Side("old", [r.tables for r in runs if r.checkout is old]),
            Side("new", [r.tables for r in runs if r.checkout is new]),
        )
    )
    return 0 if all(run.returncode == 0 for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
