"""The pipelines' queues outside Python come from the declarations: Bicep reads
infra/pipelines.json, and every file that lists the queues (infra/pipelines.json, the
emulator's config.json, local.settings.json.example, the postprovision scripts, the README's
and docs/deploy.md's settings tables) is what ``python -m localdev.pipelines`` writes from
the registry. A disagreement names the file and the pipeline."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from localdev.pipelines import DERIVED, REPO_ROOT, Derived, shipped, stale
from shared.service_layer.pipelines import Pipeline

SHARED = REPO_ROOT / "shared"


def disagreements(derived: Derived, text: str, pipelines: Sequence[Pipeline]) -> list[str]:
    """What a reader is told when ``text`` (the file ``derived.path``) is not what the
    registry makes of it: each pipeline whose setting or queue it lacks, or a queue setting
    it lists that no pipeline declares."""
    wanted = derived.write(text, pipelines)
    if wanted == text:
        return []
    problems = [
        f"{derived.path}: pipeline {p.name!r} ({p.queue_setting} = {p.default_queue}) is "
        "missing or differs"
        for p in pipelines
        if any(fact in wanted and fact not in text for fact in (p.queue_setting, p.default_queue))
    ]
    declared = {p.queue_setting for p in pipelines}
    problems += [
        f"{derived.path}: {setting} is no declared pipeline's queue setting"
        for setting in sorted(set(re.findall(r"\b(?!REPLAY_)[A-Z][A-Z0-9_]*_QUEUE_NAME\b", text)))
        if setting not in declared
    ]
    hint = "run .venv/bin/python -m localdev.pipelines"
    return [f"{problem}; {hint}" for problem in problems or [f"{derived.path} is stale"]]


@pytest.mark.parametrize("derived", DERIVED, ids=lambda d: d.path)
def test_each_file_lists_the_declared_pipelines_queues(derived: Derived) -> None:
    text = (REPO_ROOT / derived.path).read_text()
    assert disagreements(derived, text, shipped()) == []


def test_the_generator_finds_nothing_stale() -> None:
    assert list(stale()) == []


def test_a_pipeline_missing_from_a_file_is_named_with_the_file() -> None:
    pipelines = shipped()
    readme = next(d for d in DERIVED if d.path == "README.md")
    text = (REPO_ROOT / "README.md").read_text()
    signup = replace(
        pipelines[0], name="signup", queue_setting="SIGNUP_QUEUE_NAME", default_queue="su"
    )

    (problem,) = disagreements(readme, text, [*pipelines, signup])

    assert problem.startswith("README.md: pipeline 'signup' (SIGNUP_QUEUE_NAME = su)")


def test_a_queue_setting_no_pipeline_declares_is_named_with_the_file() -> None:
    first, *others = shipped()
    sh = next(d for d in DERIVED if d.path.endswith("postprovision.sh"))
    text = (REPO_ROOT / sh.path).read_text()

    problems = disagreements(sh, text, [first])

    for other in others:
        assert any(
            p.startswith(f"infra/scripts/postprovision.sh: {other.queue_setting} is no declared")
            for p in problems
        ), problems


def test_bicep_reads_the_queues_from_the_generated_file() -> None:
    main = (REPO_ROOT / "infra" / "main.bicep").read_text()
    function = (REPO_ROOT / "infra" / "app" / "function.bicep").read_text()
    assert "loadJsonContent('pipelines.json').pipelines" in main
    assert "loadJsonContent('../pipelines.json').pipelines" in function
    for pipeline in shipped():
        for path, text in (("main.bicep", main), ("function.bicep", function)):
            assert pipeline.queue_setting not in text, f"{path} names {pipeline.queue_setting}"
            assert pipeline.default_queue not in text, f"{path} names {pipeline.default_queue}"


def _files_naming(text: str) -> list[Path]:
    return sorted(p for p in SHARED.rglob("*.py") if text in p.read_text())


@pytest.mark.parametrize("pipeline", shipped(), ids=lambda p: p.name)
def test_each_pipelines_name_and_queue_setting_are_written_once_under_shared(
    pipeline: Pipeline,
) -> None:
    named = _files_naming(f'"{pipeline.name}"') + _files_naming(f"'{pipeline.name}'")
    assert len(named) == 1, [str(p.relative_to(REPO_ROOT)) for p in named]
    assert len(_files_naming(pipeline.queue_setting)) == 1
