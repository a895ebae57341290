"""The Databricks bundle is loaded the way a deploy reads it, and its job by the Databricks
bundle models (databricks-bundles from PyPI: the typed Python definition of every bundle
resource; it refuses a field a job does not have, at any depth)."""

from __future__ import annotations

import glob
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")
jobs = pytest.importorskip("databricks.bundles.jobs")

BUNDLE = Path(__file__).resolve().parents[2] / "spark_jobs"


def load_bundle(target: str) -> dict[str, Any]:
    """databricks.yml with its includes merged and the target's overrides applied."""
    root = yaml.safe_load((BUNDLE / "databricks.yml").read_text())
    for pattern in root.get("include", []):
        for path in sorted(glob.glob(str(BUNDLE / pattern))):
            included = yaml.safe_load(Path(path).read_text())
            for kind, items in included.get("resources", {}).items():
                root.setdefault("resources", {}).setdefault(kind, {}).update(items)
    variables = {name: spec.get("default") for name, spec in root.get("variables", {}).items()}
    variables.update(root["targets"][target].get("variables", {}))
    return _substitute(
        root,
        {
            **{f"var.{k}": v for k, v in variables.items()},
            "bundle.name": root["bundle"]["name"],
            "bundle.target": target,
        },
    )


def _substitute(value: Any, names: dict[str, Any]) -> Any:
    if isinstance(value, dict):
        return {k: _substitute(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, names) for v in value]
    if isinstance(value, str):
        return re.sub(r"\$\{([^}]+)\}", lambda m: str(names[m.group(1)]), value)
    return value


@pytest.mark.parametrize("target", ["dev", "prod"])
def test_every_job_of_the_bundle_loads_as_a_databricks_job(target: str) -> None:
    bundle = load_bundle(target)

    loaded = {name: jobs.Job.from_dict(spec) for name, spec in bundle["resources"]["jobs"].items()}

    assert set(loaded) == {"product_import"}
    assert bundle["targets"][target]["mode"] == {"dev": "development", "prod": "production"}[target]


def test_the_job_runs_the_wheels_entry_point_with_arguments_the_cli_accepts() -> None:
    from spark_jobs.product_import.__main__ import parse_args

    bundle = load_bundle("prod")
    job = jobs.Job.from_dict(bundle["resources"]["jobs"]["product_import"])
    task = job.tasks[0].python_wheel_task
    project = tomllib.loads((BUNDLE / "pyproject.toml").read_text())

    assert task.package_name == project["project"]["name"]
    assert (
        project["project"]["scripts"][task.entry_point] == "spark_jobs.product_import.__main__:main"
    )
    defaults = {p.name: p.default for p in job.parameters} | {"job_id": "run-1"}
    args = parse_args(
        [
            re.sub(r"\{\{job\.parameters\.(\w+)\}\}", lambda m: defaults[m[1]], p)
            for p in task.parameters
        ]
    )
    assert args.connection_setting == "ServiceBusConnection"
    assert args.storage_setting == "AzureWebJobsStorage"
    assert "product_import_wheel" in bundle["artifacts"]


def test_the_connection_strings_come_from_the_secret_scope() -> None:
    bundle = load_bundle("prod")
    cluster = bundle["resources"]["jobs"]["product_import"]["job_clusters"][0]["new_cluster"]

    assert cluster["spark_env_vars"]["ServiceBusConnection"] == (
        "{{secrets/servicebus-pipelines/servicebus-connection}}"
    )
