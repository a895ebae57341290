"""The import contracts in pyproject.toml (``[tool.importlinter]``), which ``make lint`` runs
with lint-imports: the tree keeps them, and a forbidden import added to a copy of it breaks
the contract that forbids it, by name. function_app.py is a module, not a package, so
import-linter cannot see it: its imports are checked here."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from .conftest import ROOT

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
# Each root package of the contracts, by the folder it lives in.
PACKAGES = {
    "shared": ROOT / "shared",
    "spark_jobs": ROOT / "spark_jobs",
    "localdev": ROOT / "localdev",
    "servicebus_emulator": ROOT / "packages/servicebus-emulator/src/servicebus_emulator",
    "functions_local_host": ROOT / "packages/functions-local-host/src/functions_local_host",
}


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _copy(to: Path) -> None:
    """The contracts and every root package side by side in ``to``, where lint-imports (run
    there) finds them before the installed ones."""
    shutil.copy2(ROOT / "pyproject.toml", to / "pyproject.toml")
    for package, folder in PACKAGES.items():
        shutil.copytree(
            folder,
            to / package,
            ignore=shutil.ignore_patterns("__pycache__", "_rpc", "node_modules"),
        )


def test_the_tree_keeps_every_import_contract() -> None:
    result = _lint_imports(ROOT)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "forbidden_import", "contract"),
    [
        (
            "shared/domain/orders.py",
            "from shared.adapters import table_keys",
            "the app's layers import downward only",
        ),
        (
            "shared/service_layer/orders.py",
            "from shared import bootstrap",
            "the app's layers import downward only",
        ),
        (
            "spark_jobs/product_import/columns.py",
            "import localdev.stack",
            "the app does not import the local tools",
        ),
        (
            "spark_jobs/product_import/sending.py",
            "from shared.adapters import azure_clients",
            "the Spark job reaches the app's adapters only through its clients module",
        ),
        (
            "servicebus_emulator/__init__.py",
            "import shared.config",
            "the Service Bus emulator imports neither the app nor the other local tools",
        ),
        (
            "servicebus_emulator/__init__.py",
            "import localdev.stack",
            "the Service Bus emulator imports neither the app nor the other local tools",
        ),
        (
            "shared/domain/orders.py",
            "import servicebus_emulator",
            "the app does not import the local tools",
        ),
        (
            "functions_local_host/__init__.py",
            "import servicebus_emulator",
            "the emulator and the local host do not import each other",
        ),
        (
            "functions_local_host/config.py",
            "from shared.adapters import azure_clients",
            "the local host imports neither the app nor the local tools",
        ),
        (
            "shared/domain/errors.py",
            "from shared.domain import orders",
            "no import cycle in the product",
        ),
    ],
)
def test_a_forbidden_import_breaks_its_contract(
    tmp_path: Path, module: str, forbidden_import: str, contract: str
) -> None:
    # given a copy of the tree with one forbidden import added
    _copy(tmp_path)
    path = tmp_path / module
    path.write_text(path.read_text() + f"\n{forbidden_import}  # noqa\n")

    # when the contracts are checked
    result = _lint_imports(tmp_path)

    # then lint fails, naming the broken contract
    assert result.returncode != 0, result.stdout
    assert f"{contract} BROKEN" in result.stdout


def test_function_app_imports_only_the_entrypoints() -> None:
    tree = ast.parse((ROOT / "function_app.py").read_text())
    imported = [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    imported += [
        a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names
    ]
    ours = [name for name in imported if name.split(".")[0] in PACKAGES]

    assert ours, "function_app.py registers the entrypoints' blueprints"
    assert all(name.split(".")[:2] == ["shared", "entrypoints"] for name in ours), ours


def _contracts() -> list[dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return list(config["tool"]["importlinter"]["contracts"])


def test_no_contract_ignores_an_import() -> None:
    ignoring = [c["id"] for c in _contracts() if c.get("ignore_imports")]
    assert not ignoring, f"contracts that ignore imports: {ignoring}"


def test_the_spark_contract_binds_every_module_of_the_job_but_its_clients() -> None:
    (contract,) = [c for c in _contracts() if c["id"] == "spark-job-through-its-clients"]
    modules = set()
    for path in (ROOT / "spark_jobs").rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        if path.name == "__init__.py":
            tree = ast.parse(path.read_text())
            imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
            assert not imports, f"{name} is bound by no contract: keep it free of imports"
            continue
        modules.add(name)
    listed = set(contract["source_modules"])  # type: ignore[call-overload]
    assert listed == modules - {"spark_jobs.product_import.clients"}
