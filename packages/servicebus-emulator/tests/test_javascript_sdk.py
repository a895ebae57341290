"""The conformance tests of the official JavaScript SDK (``@azure/service-bus`` from npm), run
by Node's own test runner against the same namespace as the Python tests: one pytest test per
file of js/, so pytest runs them against the emulator the fixture started.

Node finds ``@azure/service-bus`` as it finds any package: in a node_modules folder beside the
test files or above them (the repository's, which ``make setup`` fills from its package.json).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

JS_TESTS = Path(__file__).resolve().with_name("js")
SDK = [folder / "node_modules" / "@azure" / "service-bus" for folder in JS_TESTS.parents]


@pytest.mark.parametrize("script", sorted(p.name for p in JS_TESTS.glob("*.test.mjs")))
def test_the_javascript_sdk(
    script: str, connection_string: str, request: pytest.FixtureRequest
) -> None:
    node = shutil.which("node")
    if node is None or not any(folder.is_dir() for folder in SDK):
        pytest.fail(
            "Node 20 and @azure/service-bus in a node_modules above the tests are needed: "
            "run make setup (or npm install @azure/service-bus)"
        )
    env = {**os.environ, "SERVICEBUS_CONNECTION_STRING": connection_string}
    if request.node.callspec.params["connection_string"] == "emulator":
        emulator = request.getfixturevalue("emulator")  # its management endpoint, too
        env["EMULATOR_HOST"] = emulator.host
        env["EMULATOR_HTTP_PORT"] = str(emulator.http_port)
    run = subprocess.run(
        [node, "--test", "--test-reporter=spec", str(JS_TESTS / script)],
        cwd=JS_TESTS,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert run.returncode == 0, f"node --test {script} failed:\n{run.stdout}\n{run.stderr}"
