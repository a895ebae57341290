"""One runtime: the ``azure-functions-runtime`` that requirements.txt pins (what Azure installs
for Python 3.13+) is the one the local host drives, and the host refuses an app pinning
another."""

from __future__ import annotations

import re
from pathlib import Path

import azure_functions_runtime
import pytest

from localdev.host import LocalHost
from localdev.host.config import HostConfigurationError
from localdev.host.runtime_rules import installed_runtime_version, pinned_runtime_version

ROOT = Path(__file__).resolve().parents[2]


def test_requirements_pin_an_exact_runtime_and_the_local_host_runs_that_version() -> None:
    pinned = pinned_runtime_version(ROOT / "requirements.txt")

    assert pinned is not None, "requirements.txt must pin azure-functions-runtime==<version>"
    assert installed_runtime_version() == pinned
    # ... and it is that distribution's module the host imports (localdev/host/worker.py).
    site = Path(azure_functions_runtime.__file__).parents[1]
    assert (site / f"azure_functions_runtime-{pinned}.dist-info").is_dir()


def test_the_dev_requirements_take_the_runtime_from_requirements_txt() -> None:
    dev = (ROOT / "requirements-dev.txt").read_text()
    assert re.search(r"^-r requirements\.txt$", dev, re.MULTILINE)
    assert not re.search(r"^azure[-_.]functions[-_.]runtime\b", dev, re.MULTILINE | re.IGNORECASE)


def test_the_host_refuses_an_app_that_pins_another_runtime(tmp_path: Path) -> None:
    script = tmp_path / "function_app.py"
    script.write_text("import azure.functions as func\napp = func.FunctionApp()\n")
    (tmp_path / "requirements.txt").write_text("azure-functions\nazure-functions-runtime==0.0.1\n")

    with pytest.raises(HostConfigurationError) as refused:
        LocalHost(script, {}).start()

    assert "azure-functions-runtime==0.0.1" in str(refused.value)
    assert installed_runtime_version() in str(refused.value)
