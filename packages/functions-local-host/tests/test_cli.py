"""``python -m functions_local_host``: settings from local.settings.json, the startup listing, the
invocation log lines, and a graceful stop on SIGTERM that lets a request in flight finish."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from functions_local_host.config import apply_settings, load_settings
from local_host_testing import SAMPLE_APP, free_port, wait_for


def test_settings_come_from_the_example_when_the_file_is_absent_and_never_override(
    tmp_path: Path,
) -> None:
    (tmp_path / "local.settings.json.example").write_text(
        json.dumps({"IsEncrypted": False, "Values": {"A": "from-file", "B": "from-file"}})
    )
    values = load_settings(tmp_path / "local.settings.json")
    environ = {"A": "from-environment"}
    apply_settings(values, environ)
    assert environ == {"A": "from-environment", "B": "from-file"}


def test_the_cli_runs_the_app_logs_invocations_and_stops_gracefully(tmp_path: Path) -> None:
    settings = tmp_path / "local.settings.json"
    settings.write_text(json.dumps({"Values": {"FUNCTIONS_HOST_KEY": "k"}}))
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "functions_local_host",
            "--port",
            str(port),
            "--settings",
            str(settings),
            "--host-json",
            str(tmp_path / "host.json"),
            "--app",
            str(SAMPLE_APP),
            "--functions",
            "public",
            "slow",
        ],
        cwd=SAMPLE_APP.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout or []), daemon=True)
    reader.start()
    try:
        wait_for(
            lambda: any("Host started" in line for line in lines),
            timeout=15,
            what="the host to start",
        )
        listing = "".join(lines)
        assert f"public: [GET] http://127.0.0.1:{port}/api/public/{{name?}}" in listing
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/public/x", timeout=5) as r:
            assert r.status == 200

        slow_result: list[int] = []

        def slow_request() -> None:
            url = f"http://127.0.0.1:{port}/api/slow?seconds=1.5"
            with urllib.request.urlopen(url, timeout=10) as response:
                slow_result.append(response.status)

        request = threading.Thread(target=slow_request)
        request.start()
        time.sleep(0.5)
        process.send_signal(signal.SIGTERM)
        request.join(10)
        assert process.wait(15) == 0
        assert slow_result == [200], "the request in flight was cut off"
    finally:
        if process.poll() is None:
            process.kill()
    reader.join(5)
    output = "".join(lines)
    assert "Executing 'Functions.public' (Reason=" in output
    assert "Executed 'Functions.public' (Succeeded, Id=" in output
    assert "Executed 'Functions.slow' (Succeeded" in output
