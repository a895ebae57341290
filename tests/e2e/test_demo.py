"""``make demo`` is the project's front door: it must tell its whole story and exit 0. How
long it takes is measured by hand (README), not asserted here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parents[2]
# The demo gives up on its own after 270 s (--timeout); this only bounds a hung process.
HUNG_AFTER_SECONDS = 600


def test_the_demo_tells_the_whole_story_and_exits_0(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "localdev.demo", "--log", str(tmp_path / "demo.log")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=HUNG_AFTER_SECONDS,
        check=False,
    )

    output = done.stdout
    assert done.returncode == 0, output[-3000:] + done.stderr[-2000:]
    assert "FAILED" not in output
    for step in (
        "== Importing the product catalogue",
        "== Submitting 17 orders",
        "== The pipeline runs",
        "== Report",
        "Failed sessions by task and reason",
        "Rows archived in Table Storage",
        "== The payment provider is back",
        "== The story came out as expected: 14 checks passed",
    ):
        assert step in output, f"{step!r} missing from:\n{output[-3000:]}"
