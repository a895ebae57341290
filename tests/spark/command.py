"""The job's command as a user or an orchestrator runs it: a process of its own, with the
environment it is given (connections, telemetry settings) and nothing else of the tests'."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run_job_command(args: Sequence[str], environ: Mapping[str, str]) -> dict[str, Any]:
    """``python -m spark_jobs.product_import ARGS --master local[2]`` with this environment
    minus any telemetry settings, plus ``environ``; its printed manifest."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("OTEL_", "APPLICATIONINSIGHTS_", "TRACEPARENT"))
    }
    env.update(SPARK_LOCAL_IP="127.0.0.1", **environ)
    done = subprocess.run(
        [sys.executable, "-m", "spark_jobs.product_import", *args, "--master", "local[2]"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))
