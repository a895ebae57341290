"""One runtime: requirements.txt pins the ``azure-functions-runtime`` that Azure installs for
the app (Python 3.13+), and the local host, which refuses any other, pins the same."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from functions_local_host.runtime_rules import pinned_runtime_version

ROOT = Path(__file__).resolve().parents[2]
HOST_PYPROJECT = ROOT / "packages" / "functions-local-host" / "pyproject.toml"


def test_the_dev_requirements_take_the_runtime_from_requirements_txt_as_the_host_pins_it() -> None:
    dev = (ROOT / "requirements-dev.txt").read_text()
    assert re.search(r"^-r requirements\.txt$", dev, re.MULTILINE)
    assert not re.search(r"^azure[-_.]functions[-_.]runtime\b", dev, re.MULTILINE | re.IGNORECASE)
    host = tomllib.loads(HOST_PYPROJECT.read_text())["project"]["dependencies"]
    assert f"azure-functions-runtime=={pinned_runtime_version(ROOT / 'requirements.txt')}" in host
