"""What the pipeline declarations imply, outside the declarations, comes from them: the list
that wires them (shared/bootstrap/pipeline_list.py), the queues, queue settings, tables and
thread count that Bicep reads from infra/app-resources.json, and every file that lists them
(the emulator's config.json, local.settings.json.example, the postprovision scripts, the
README's and docs/deploy.md's settings and table lists) are what ``python -m localdev.derived``
writes. A disagreement names the file and the pipeline."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from localdev.derived import REPO_ROOT, stale
from localdev.derived_files import DERIVED, Derived, Facts
from localdev.pipeline_list import shipped_modules
from shared.bootstrap.declared import APP_TABLES
from shared.domain.pipelines import Pipeline
from tests.builders import PIPELINES

SHARED = REPO_ROOT / "shared"
FACTS = Facts.of(shipped_modules(REPO_ROOT), REPO_ROOT)


def disagreements(derived: Derived, text: str, facts: Facts) -> list[str]:
    """What a reader is told when ``text`` (the file ``derived.path``) is not what the
    declarations make of it: each pipeline whose setting or queue it lacks, a queue setting no
    pipeline declares, each table it lacks."""
    wanted = derived.write(text, facts)
    if wanted == text:
        return []
    problems = [
        f"{derived.path}: pipeline {p.name!r} ({p.queue_setting} = {p.default_queue}) is "
        "missing or differs"
        for p in facts.pipelines
        if any(fact in wanted and fact not in text for fact in (p.queue_setting, p.default_queue))
    ]
    declared = {p.queue_setting for p in facts.pipelines}
    problems += [
        f"{derived.path}: {setting} is no declared pipeline's queue setting"
        for setting in sorted(set(re.findall(r"\b(?!REPLAY_)[A-Z][A-Z0-9_]*_QUEUE_NAME\b", text)))
        if setting not in declared
    ]
    problems += [
        f"{derived.path}: table {table!r} is missing"
        for table in facts.tables
        if f"`{table}`" in wanted and f"`{table}`" not in text
    ]
    hint = "run .venv/bin/python -m localdev.derived"
    return [f"{problem}; {hint}" for problem in problems or [f"{derived.path} is stale"]]


@pytest.mark.parametrize("derived", DERIVED, ids=lambda d: d.path)
def test_each_file_lists_what_the_declarations_imply(derived: Derived) -> None:
    text = (REPO_ROOT / derived.path).read_text()
    assert disagreements(derived, text, FACTS) == []


def test_the_generator_finds_nothing_stale() -> None:
    assert list(stale()) == []


def test_the_list_wires_every_declared_pipeline_and_the_app_runs_it() -> None:
    assert [d.pipeline for d in shipped_modules(REPO_ROOT)] == list(PIPELINES)
    assert FACTS.tables == APP_TABLES


def test_a_pipeline_missing_from_a_file_is_named_with_the_file() -> None:
    readme = next(d for d in DERIVED if d.path == "README.md")
    text = (REPO_ROOT / "README.md").read_text()
    signup = replace(
        FACTS.pipelines[0],
        name="signup",
        queue_setting="SIGNUP_QUEUE_NAME",
        default_queue="su",
        tables=("signups",),
    )
    facts = replace(FACTS, pipelines=(*FACTS.pipelines, signup), tables=(*FACTS.tables, "signups"))

    problems = disagreements(readme, text, facts)

    assert problems[0].startswith("README.md: pipeline 'signup' (SIGNUP_QUEUE_NAME = su)")
    assert problems[1].startswith("README.md: table 'signups' is missing")


def test_a_queue_setting_no_pipeline_declares_is_named_with_the_file() -> None:
    first, *others = FACTS.pipelines
    sh = next(d for d in DERIVED if d.path.endswith("postprovision.sh"))
    text = (REPO_ROOT / sh.path).read_text()

    problems = disagreements(sh, text, replace(FACTS, pipelines=(first,)))

    for other in others:
        assert any(
            p.startswith(f"infra/scripts/postprovision.sh: {other.queue_setting} is no declared")
            for p in problems
        ), problems


def test_bicep_reads_queues_tables_and_threads_from_the_generated_file() -> None:
    main = (REPO_ROOT / "infra" / "main.bicep").read_text()
    function = (REPO_ROOT / "infra" / "app" / "function.bicep").read_text()
    assert "var appResources = loadJsonContent('app-resources.json')" in main
    assert "tables: appResources.tables" in main
    assert "loadJsonContent('../app-resources.json').pipelines" in function
    assert "string(loadJsonContent('../app-resources.json').threadCount)" in function
    for pipeline in PIPELINES:
        for path, text in (("main.bicep", main), ("function.bicep", function)):
            assert pipeline.queue_setting not in text, f"{path} names {pipeline.queue_setting}"
            assert pipeline.default_queue not in text, f"{path} names {pipeline.default_queue}"
            for table in pipeline.tables:
                assert f"'{table}'" not in text, f"{path} names {table}"


def _files_naming(text: str) -> list[Path]:
    return sorted(p for p in SHARED.rglob("*.py") if text in p.read_text())


@pytest.mark.parametrize("pipeline", PIPELINES, ids=lambda p: p.name)
def test_each_pipelines_name_queue_setting_and_tables_are_written_once_under_shared(
    pipeline: Pipeline,
) -> None:
    named = _files_naming(f'"{pipeline.name}"') + _files_naming(f"'{pipeline.name}'")
    assert len(named) == 1, [str(p.relative_to(REPO_ROOT)) for p in named]
    assert len(_files_naming(pipeline.queue_setting)) == 1
    for table in pipeline.tables:
        assert len(_files_naming(f'"{table}"')) == 1, table
