"""docs/pipelines.md's promise, kept on a copy of the repository as a fresh clone has it: a
new stop-on-failure pipeline with an HTTP start route is its declaration and its tasks (the
worked example's two files, moved into shared/) and its test, plus the one documented
command; after that command nothing else differs from the clone, and the consistency tests,
the settings tests and the function app's contract pass with the new pipeline in them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from localdev.pipelines import DERIVED

from .conftest import ROOT

DECLARATION = "shared/service_layer/pipelines/onboarding.py"
TASKS = "shared/service_layer/onboarding_tasks.py"
TEST = "tests/e2e/test_onboarding.py"
COMMAND = [sys.executable, "-m", "localdev.pipelines"]
CHECKS = [
    "tests/infra/test_pipeline_queues.py",
    "tests/infra/test_settings_consistency.py",
    "tests/infra/test_emulator_config.py",
    "tests/bindings/test_function_app.py",
    "tests/unit/test_config.py",
]


def _clone(to: Path) -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True
    ).stdout.decode()
    for name in filter(None, tracked.split("\0")):
        source = ROOT / name
        if source.is_file():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, to / name)


def _differing(clone: Path) -> set[str]:
    names = {str(p.relative_to(clone)) for p in clone.rglob("*") if p.is_file()}
    return {
        name
        for name in names
        if ("__pycache__" not in name and not (ROOT / name).is_file())
        or ((ROOT / name).is_file() and (ROOT / name).read_bytes() != (clone / name).read_bytes())
    }


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PIPELINE_MODULES"}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=240)


def test_a_new_pipeline_is_three_files_and_one_command(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    _clone(clone)
    # By hand, as the guide says: the example's tasks and declaration, in shared/ ...
    examples = ROOT / "tests" / "examples"
    (clone / TASKS).write_text((examples / "onboarding_tasks.py").read_text())
    declaration = (examples / "onboarding.py").read_text()
    (clone / DECLARATION).write_text(
        declaration.replace("from .onboarding_tasks import", "from ..onboarding_tasks import")
    )
    # ... and the test, which no longer needs PIPELINE_MODULES to find the pipeline.
    test = (clone / TEST).read_text()
    (clone / TEST).write_text(
        test.replace('    "PIPELINE_MODULES": "tests.examples.onboarding",\n', "")
    )
    for example in ("onboarding.py", "onboarding_tasks.py"):
        (clone / "tests" / "examples" / example).unlink()

    generated = _run(COMMAND, clone)

    assert generated.returncode == 0, generated.stdout + generated.stderr
    hand_made = {DECLARATION, TASKS, TEST}
    removed_examples = {"tests/examples/onboarding.py", "tests/examples/onboarding_tasks.py"}
    assert _differing(clone) - removed_examples <= hand_made | {d.path for d in DERIVED}
    assert "ONBOARDING_QUEUE_NAME" in (clone / "local.settings.json.example").read_text()
    assert "onboarding-tasks" in (clone / "infra" / "pipelines.json").read_text()
    checked = _run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", *CHECKS], clone
    )
    assert checked.returncode == 0, checked.stdout[-4000:] + checked.stderr[-2000:]
    assert _run([*COMMAND, "--check"], clone).returncode == 0


def test_the_guide_names_the_files_and_the_command() -> None:
    guide = (ROOT / "docs" / "pipelines.md").read_text()
    for named in (DECLARATION, TASKS, TEST, "python -m localdev.pipelines"):
        assert named in guide, named
