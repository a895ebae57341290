"""One runtime: the ``azure-functions-runtime`` this package pins exactly is the one the host
drives, and the host refuses an app whose requirements.txt pins another (Azure installs the
pinned one for Python 3.13+)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import azure_functions_runtime
import pytest

from functions_local_host import LocalHost
from functions_local_host.config import HostConfigurationError
from functions_local_host.runtime_rules import installed_runtime_version, pinned_runtime_version

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_the_package_pins_an_exact_runtime_and_the_host_runs_that_version(tmp_path: Path) -> None:
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("\n".join(dependencies))
    pinned = pinned_runtime_version(requirements)

    assert pinned is not None, "pyproject.toml must pin azure-functions-runtime==<version>"
    assert installed_runtime_version() == pinned
    # ... and it is that distribution's module the host imports (worker.py).
    site = Path(azure_functions_runtime.__file__).parents[1]
    assert (site / f"azure_functions_runtime-{pinned}.dist-info").is_dir()


def test_the_host_refuses_an_app_that_pins_another_runtime(tmp_path: Path) -> None:
    script = tmp_path / "function_app.py"
    script.write_text("import azure.functions as func\napp = func.FunctionApp()\n")
    (tmp_path / "requirements.txt").write_text("azure-functions\nazure-functions-runtime==0.0.1\n")

    with pytest.raises(HostConfigurationError) as refused:
        LocalHost(script, {}).start()

    assert "azure-functions-runtime==0.0.1" in str(refused.value)
    assert installed_runtime_version() in str(refused.value)
