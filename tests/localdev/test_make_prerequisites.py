"""``make setup`` checks Python 3.13 and Node first, and says what to install, before anything
installs (npm no longer runs for a minute before a missing Python is reported, nor fails with
``npm: No such file or directory``)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAKE = shutil.which("make")
pytestmark = pytest.mark.skipif(MAKE is None, reason="make is not installed")


def run_make(target: str, path: Path, **environ: str) -> subprocess.CompletedProcess[str]:
    """``make <target>`` with only ``path`` on PATH: the check fails before anything runs."""
    assert MAKE is not None
    env = {"PATH": str(path), "HOME": os.environ.get("HOME", "/"), **environ}
    return subprocess.run(
        [MAKE, "--no-print-directory", target],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def bin_with(tmp_path: Path, **scripts: str) -> Path:
    """A folder of shell tools, plus ``scripts`` (name: shell body) as commands."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for tool in ("sh", "test", "cat", "dirname"):
        found = shutil.which(tool)
        if found:
            (folder / tool).symlink_to(found)
    for name, body in scripts.items():
        script = folder / name
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(0o755)
    return folder


def test_without_node_setup_says_to_install_it_and_installs_nothing(tmp_path: Path) -> None:
    folder = bin_with(tmp_path)

    done = run_make("setup", folder, PYTHON="/usr/bin/true")

    assert done.returncode != 0
    assert "Node.js 20 or later, with npm, is needed" in done.stderr
    assert "==>" not in done.stdout  # nothing began to install


def test_an_old_node_is_named_with_its_version(tmp_path: Path) -> None:
    folder = bin_with(
        tmp_path,
        node='case "$1" in -p) echo 18;; --version) echo v18.19.0;; esac',
        npm="exit 0",
    )

    done = run_make("prerequisites", folder, PYTHON="/usr/bin/true")

    assert done.returncode != 0
    assert "node on PATH is v18.19.0" in done.stderr


# Where tools/find-python looks besides PATH and pyenv.
FIXED_PYTHONS = ("/usr/local/bin/python3.13", "/usr/bin/python3.13", "/opt/homebrew/bin/python3.13")


@pytest.mark.skipif(
    any(Path(p).exists() for p in FIXED_PYTHONS), reason="a Python 3.13 is installed system-wide"
)
def test_without_python_313_setup_says_how_to_get_it(tmp_path: Path) -> None:
    folder = bin_with(
        tmp_path, node='case "$1" in -p) echo 20;; esac', npm="exit 0", python3="exit 1"
    )

    done = run_make("setup", folder, PYENV_ROOT=str(tmp_path / "no-pyenv"), HOME=str(tmp_path))

    assert done.returncode != 0
    assert "Python 3.13 is needed" in done.stderr
    assert "Node.js" not in done.stderr
    assert "==>" not in done.stdout
