"""Another commit of this repository checked out beside this checkout, with a Python to run
it: the release deployed now, which a deploy runs next to the new code while the old instances
drain (tests/upgrade), or any commit a benchmark is compared with (bench.compare).

The release deployed now is the commit named in ``tests/upgrade/previous-release``
(docs/deploy.md, "Upgrading", says when it changes), so a fresh clone with its history finds it,
as CI's does. A commit is checked out as a ``git worktree`` of this repository in a folder of
the caller's, and removed after. Its instances run on this checkout's local host (the platform:
Azure runs every release on the same Functions host) with the Python packages its
``requirements.txt`` names, which Azure installs for it: this venv's when the file is the same,
else a venv of its own, made with uv from uv's cache first (downloading only what the cache
lacks)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from localdev.stack_layout import REPO_ROOT

RELEASE_FILE = REPO_ROOT / "tests" / "upgrade" / "previous-release"
LOCAL_HOST_PACKAGE = REPO_ROOT / "packages" / "functions-local-host"
DEV_REQUIREMENTS = REPO_ROOT / "requirements-dev.txt"


@dataclass(frozen=True)
class Release:
    commit: str
    tree: Path  # its checkout
    python: str  # the interpreter whose packages are its requirements'

    @property
    def app(self) -> Path:
        return self.tree / "function_app.py"

    @property
    def host_json(self) -> Path:
        return self.tree / "host.json"


def previous_commit() -> str:
    """The commit ``previous-release`` names (its one line that is not a comment)."""
    lines = [line.strip() for line in RELEASE_FILE.read_text().splitlines()]
    (commit,) = [line for line in lines if line and not line.startswith("#")]
    return commit


@contextmanager
def previous_release(folder: Path) -> Iterator[Release]:
    """The previous release checked out in ``folder``/release, with its Python."""
    with release(previous_commit(), folder) as found:
        yield found


@contextmanager
def release(commit: str, folder: Path, *, with_dev_tools: bool = False) -> Iterator[Release]:
    """``commit`` checked out in ``folder``/release, with its Python; ``with_dev_tools``: that
    Python also has what this checkout's ``requirements-dev.txt`` adds to the app's packages
    (the Service Bus emulator, the SMTP sink's server, PySpark: what a benchmark's stack needs)."""
    resolved = _git("rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}", check=False)
    if not resolved.strip():
        raise RuntimeError(
            f"this clone has no commit {commit!r} ({RELEASE_FILE} names the release deployed "
            "now): clone with the whole history (no --depth), or fetch it."
        )
    tree = folder / "release"
    _git("worktree", "add", "--detach", str(tree), resolved.strip())
    try:
        python = _python_for(tree, folder / "venv", with_dev_tools=with_dev_tools)
        yield Release(resolved.strip(), tree, python)
    finally:
        _git("worktree", "remove", "--force", str(tree), check=False)
        _git("worktree", "prune", check=False)


def _python_for(tree: Path, venv: Path, *, with_dev_tools: bool) -> str:
    if (tree / "requirements.txt").read_bytes() == (REPO_ROOT / "requirements.txt").read_bytes():
        return sys.executable
    uv = str(Path(sys.executable).with_name("uv"))
    python = str(venv / "bin" / "python")
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
    install = [uv, "pip", "install", "--quiet", "--python", python, "-r",
               str(tree / "requirements.txt"), "-e", str(LOCAL_HOST_PACKAGE)]  # fmt: skip
    if with_dev_tools:
        install += _dev_tools()
    if subprocess.run([*install, "--offline"], check=False).returncode != 0:
        subprocess.run(install, check=True)
    return python


def _dev_tools() -> list[str]:
    """``requirements-dev.txt``'s own lines as arguments of ``uv pip install``: without its
    ``-r requirements.txt`` (the release's own requirements stand for it), its editable
    packages at this checkout's paths."""
    arguments: list[str] = []
    for raw in DEV_REQUIREMENTS.read_text().splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith(("#", "-r")):
            continue
        if line.startswith("-e "):
            arguments += ["-e", str(REPO_ROOT / line.removeprefix("-e ").strip())]
        else:
            arguments.append(line)
    return arguments


def _git(*args: str, check: bool = True) -> str:
    done = subprocess.run(
        ["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, check=False
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout
