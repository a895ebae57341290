"""README.md's commands work as written: every ``sh`` block runs, in order, in one shell, against
``make up``'s stack; a block that cannot run here says why just above it.

The blocks run in a folder that links to every file of the checkout but ``.data/`` and
``local.settings.json`` (so what the README copies or writes stays the test's), with the stack's
connection variables removed from the environment (the README must set them itself), and with
``curl`` required to answer 2xx (``--fail-with-body``) unless the command itself passes
``--fail``/``-f``. ``set -eu``: a failing command or an unset variable stops the run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from functions_local_host.timers import Schedule

from .make_up import REPO_ROOT, MakeUp, free_ports

README = REPO_ROOT / "README.md"
_FENCE = re.compile(r"^```(\S*)\s*$")
_NOT_RUN = re.compile(r"^<!-- not run by tests/e2e/test_readme\.py: (.+) -->$")
_SHELL = {"sh", "bash", "shell", "console", "zsh"}
# What a runnable block must not hold: placeholders a shell would take for redirections or
# literal text, and commands many machines lack.
_PLACEHOLDER = re.compile(r"<[A-Za-z_][\w -]*>|=\.\.\.(\s|$)|\buuidgen\b")
# Not linked into the test's checkout: what the README's commands make or the test provides.
_OWN = {".data", ".git", "local.settings.json"}
# The stack's variables, which the README must set itself (. .data/stack.env).
_STACK_VARIABLES = (
    "API",
    "KEY",
    "AzureWebJobsStorage",
    "ServiceBusConnection",
    "PYSPARK_PYTHON",
    "SPARK_LOCAL_IP",
)
_PROLOGUE = r"""set -eu
curl() {
  local arg
  for arg in "$@"; do
    if [[ "$arg" == --fail* || "$arg" =~ ^-[a-zA-Z]*f[a-zA-Z]*$ ]]; then
      command curl --silent --show-error --max-time 60 "$@"; return
    fi
  done
  command curl --fail-with-body --silent --show-error --max-time 60 "$@"
}
"""


@dataclass(frozen=True)
class Block:
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    not_run: str | None  # why, when the README says the test does not run it


def blocks(markdown: str) -> Iterator[Block]:
    lines = markdown.splitlines()
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        previous = lines[index - 1].strip() if index else ""
        why = _NOT_RUN.match(previous)
        yield Block(
            line=index + 1,
            language=opening.group(1),
            text="\n".join(lines[index + 1 : end]) + "\n",
            not_run=why.group(1) if why else None,
        )
        index = end + 1


def shell_blocks() -> list[Block]:
    return [b for b in blocks(README.read_text()) if b.language in _SHELL]


def runnable() -> list[Block]:
    return [b for b in shell_blocks() if b.not_run is None]


def script(chosen: list[Block]) -> str:
    parts = [_PROLOGUE]
    for block in chosen:
        parts.append(f'echo "### README.md line {block.line}"\n{block.text}')
    return "\n".join(parts)


def test_every_shell_block_is_sh_and_runs_or_says_why_not() -> None:
    found = shell_blocks()
    assert found, "no shell blocks found: has the README's fence syntax changed?"
    assert [b.line for b in found if b.language != "sh"] == [], "mark shell blocks as ```sh"
    assert runnable(), "every block is marked not run"


def test_runnable_blocks_hold_no_placeholders() -> None:
    offending = [
        f"README.md line {b.line}: {match.group(0)!r}"
        for b in runnable()
        for match in _PLACEHOLDER.finditer(b.text)
    ]
    assert not offending, offending


def test_the_placeholder_check_sees_what_broke_the_readme_before() -> None:
    for bad in ("KEY=...\n", "curl $API/replays/<request_id>\n", '-H "Key: $(uuidgen)"\n'):
        assert _PLACEHOLDER.search(bad), bad


# A loop that waits, and what it must do each time round: say so.
_LOOP = re.compile(r"^\s*(?:until|while)\b.*?\bdo\b(?P<body>.*?)\bdone\b", re.M | re.S)
_SAYS = re.compile(r"\b(?:echo|printf)\b")
# The longest a newcomer's make up leaves them waiting without a word (the example settings).
SILENCE_MAX_SECONDS = 30


def test_every_wait_loop_says_what_it_waits_for() -> None:
    loops = [(b.line, m.group(0)) for b in runnable() for m in _LOOP.finditer(b.text)]
    assert loops, "no until/while loops found: has the README changed?"
    silent = [f"README.md line {line}: {loop!r}" for line, loop in loops if not _SAYS.search(loop)]
    assert not silent, silent


def test_the_example_settings_archive_dead_letters_within_seconds() -> None:
    # The README's loops wait for the archive timer: with the example's schedule (what make up
    # runs) each wait is shorter than the silence a newcomer should have to sit through.
    settings = json.loads((REPO_ROOT / "local.settings.json.example").read_text())["Values"]
    schedule = Schedule(settings["DLQ_ARCHIVE_SCHEDULE"])
    start = datetime(2026, 1, 1, tzinfo=UTC)
    first = schedule.next_after(start)
    assert (schedule.next_after(first) - first).total_seconds() <= SILENCE_MAX_SECONDS


def checkout_for_the_test(folder: Path) -> Path:
    folder.mkdir()
    for entry in REPO_ROOT.iterdir():
        if entry.name not in _OWN:
            (folder / entry.name).symlink_to(entry)
    return folder


@pytest.mark.e2e
@pytest.mark.timeout(900)
def test_the_readme_runs_as_written_against_make_up(tmp_path: Path) -> None:
    checkout = checkout_for_the_test(tmp_path / "checkout")
    stack = MakeUp(
        checkout / ".data",
        free_ports(),
        env={},  # the example settings, as a newcomer's make up runs them
        cwd=checkout,
        settings=checkout / "local.settings.json",
    )
    try:
        stack.wait_ready()
        env = {k: v for k, v in os.environ.items() if k not in _STACK_VARIABLES}
        done = subprocess.run(
            ["bash", "-c", script(runnable())],
            cwd=checkout,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=780,
            check=False,
        )
    finally:
        stack.kill()
    tail = done.stdout[-6000:]
    markers = re.findall(r"^### (README\.md line \d+)$", done.stdout, re.M)
    assert done.returncode == 0, (
        f"a command of the block at {markers[-1] if markers else '?'} failed "
        f"(exit {done.returncode}):\n{tail}"
    )
    # The import's counts through the API end the Spark block; the last block's commands ran.
    assert '"rows_imported": 21' in done.stdout, tail
    last = runnable()[-1]
    assert f"### README.md line {last.line}" in done.stdout, tail
