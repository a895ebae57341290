"""docs/pipelines.md's promise, kept on a copy of the working tree (tracked and untracked
files, as a fresh clone of this branch would have them once committed): a new pipeline on the
container's ports is three hand-written files (its declaration, its tasks, its test) and one
command; a pipeline with a port and a Table adapter of its own is six (the port, the adapter
and its twin besides), the files written exactly as the guide shows them. After the command
nothing else differs from the copy, and the tests a new pipeline touches pass there: the
derived files, the settings, the function app's contract and its OpenAPI document, the
wiring, the ports, the stored tables, the import contracts, and the new pipeline's own test.

Each trial takes a few tens of seconds (the onboarding trial's own test is end to end, on
make up's stack); they run only the tests a pipeline touches, not the whole suite."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from localdev.derived_files import DERIVED

from .conftest import ROOT

GUIDE = ROOT / "docs" / "pipelines.md"
COMMAND = [sys.executable, "-m", "localdev.derived"]
LISTED = "shared/bootstrap/pipeline_list.py"
# The tests a new pipeline touches: everything that reads the declarations or what they imply.
TOUCHED = [
    "tests/infra/test_derived_files.py",
    "tests/infra/test_settings_consistency.py",
    "tests/infra/test_emulator_config.py",
    "tests/infra/test_production_settings.py",
    "tests/infra/test_bicep.py",
    "tests/infra/test_layers.py::test_the_tree_keeps_every_import_contract",
    "tests/bindings/test_function_app.py",
    "tests/bindings/test_openapi.py",
    "tests/unit/test_app_pipelines.py",
    "tests/unit/test_config.py",
    "tests/unit/test_ports.py",
    "tests/upgrade/test_stored_shapes.py::test_every_table_the_app_keeps_is_a_stored_shape",
]

# The onboarding trial: the example's files, where the guide's steps put them.
ONBOARDING_DECLARATION = "shared/domain/pipelines/onboarding.py"
ONBOARDING_TASKS = "shared/service_layer/onboarding_tasks.py"
ONBOARDING_TEST = "tests/e2e/test_onboarding.py"


def working_tree(to: Path) -> None:
    """Every file of the working tree that git does not ignore, as it is now (committed or
    not), into ``to``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, to / name)
    (to / "node_modules").symlink_to(ROOT / "node_modules")  # Azurite, as make setup installs


def differing(clone: Path) -> set[str]:
    """The files of ``clone`` that git would not ignore and that are not in the working tree,
    or differ from it (caches the tools leave are ignored, as in a clone)."""
    found = set()
    for path in clone.rglob("*"):
        name = str(path.relative_to(clone))
        if not path.is_file() or name.startswith("node_modules"):
            continue
        original = ROOT / name
        if not original.is_file() or original.read_bytes() != path.read_bytes():
            found.add(name)
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"],
        cwd=ROOT,
        input="\n".join(sorted(found)),
        capture_output=True,
        text=True,
    ).stdout.split()
    return found - set(ignored)


def run(command: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PIPELINE_MODULES", "PYTHONPATH")}
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def guide_files() -> dict[str, str]:
    """The files the guide shows whole: path -> text (``<!-- file: path -->`` above a block)."""
    blocks = re.findall(r"<!-- file: (\S+) -->\n```python\n(.*?)\n```", GUIDE.read_text(), re.S)
    return {path: text + "\n" for path, text in blocks}


def follow_the_command_and_test(clone: Path, hand_made: set[str], own_test: str) -> None:
    generated = run(COMMAND, clone)
    assert generated.returncode == 0, generated.stdout + generated.stderr
    assert differing(clone) <= hand_made | {d.path for d in DERIVED} | {LISTED}
    styled = run([sys.executable, "-m", "ruff", "check", *sorted(hand_made)], clone)
    assert styled.returncode == 0, styled.stdout
    formatted = run([sys.executable, "-m", "ruff", "format", "--check", *sorted(hand_made)], clone)
    assert formatted.returncode == 0, formatted.stdout
    checked = run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-n",
            "0",
            "-p",
            "no:cacheprovider",
            *TOUCHED,
            own_test,
        ],
        clone,
        timeout=600,
    )
    assert checked.returncode == 0, checked.stdout[-6000:] + checked.stderr[-2000:]
    assert run([*COMMAND, "--check"], clone).returncode == 0


def test_a_pipeline_on_the_containers_ports_is_three_files_and_one_command(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    working_tree(clone)
    examples = ROOT / "tests" / "examples"
    # 1. the declaration, as the example has it
    (clone / ONBOARDING_DECLARATION).write_text((examples / "onboarding.py").read_text())
    # 2. the tasks, their import of the task names made the declaration's
    tasks = (examples / "onboarding_tasks.py").read_text()
    (clone / ONBOARDING_TASKS).write_text(
        tasks.replace("from .onboarding import", "from shared.domain.pipelines.onboarding import")
    )
    sorted_imports = run([sys.executable, "-m", "ruff", "check", "--fix", ONBOARDING_TASKS], clone)
    assert sorted_imports.returncode == 0, sorted_imports.stdout
    # 4. the test, its stack without PIPELINE_MODULES
    test = (clone / ONBOARDING_TEST).read_text()
    shipped = re.sub(r"pipeline_stack\(\{\"PIPELINE_MODULES\": [^}]*\}\)", "pipeline_stack()", test)
    assert shipped != test
    (clone / ONBOARDING_TEST).write_text(shipped)

    # 3. the command, then the tests
    follow_the_command_and_test(
        clone, {ONBOARDING_DECLARATION, ONBOARDING_TASKS, ONBOARDING_TEST}, ONBOARDING_TEST
    )
    assert "ONBOARDING_QUEUE_NAME" in (clone / "local.settings.json.example").read_text()
    assert "onboarding-tasks" in (clone / "infra" / "app-resources.json").read_text()


def test_a_pipeline_with_its_own_table_adapter_is_six_files_and_one_command(
    tmp_path: Path,
) -> None:
    clone = tmp_path / "clone"
    working_tree(clone)
    files = guide_files()
    assert len(files) == 6, sorted(files)
    for path, text in files.items():
        (clone / path).parent.mkdir(parents=True, exist_ok=True)
        (clone / path).write_text(text)
    (own_test,) = [path for path in files if path.startswith("tests/") and "/test_" in path]

    follow_the_command_and_test(clone, set(files), own_test)
    resources = (clone / "infra" / "app-resources.json").read_text()
    assert '"supplierstock"' in resources and '"restock-tasks"' in resources
    assert "TableSupplierStock" in (clone / LISTED).read_text()


def test_the_guide_names_the_files_and_the_command() -> None:
    guide = GUIDE.read_text()
    for named in (
        ONBOARDING_DECLARATION,
        ONBOARDING_TASKS,
        ONBOARDING_TEST,
        "python -m localdev.derived",
        "shared/service_layer/ports/supplier_stock.py",
        "shared/adapters/table_supplier_stock.py",
    ):
        assert named in guide, named
