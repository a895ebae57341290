"""The Databricks bundle is loaded the way a deploy reads it, and its job by the Databricks
bundle models (databricks-bundles from PyPI: the typed Python definition of every bundle
resource; it refuses a field a job does not have, at any depth)."""

from __future__ import annotations

import glob
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from databricks.bundles import jobs

from shared.domain.pipelines import PRODUCT_IMPORT

BUNDLE = Path(__file__).resolve().parents[2] / "spark_jobs"


DEPLOYER = "deployer@example.com"  # ${workspace.current_user.userName} in a deploy
# The Apache Spark version of each Databricks LTS runtime (docs.databricks.com/release-notes/
# runtime, "Supported Databricks Runtime LTS releases").
LTS_SPARK = {"17.3": "4.0", "16.4": "3.5", "15.4": "3.5", "14.3": "3.5"}
# What a deploy passes with --var (the values of azd env get-value).
DEPLOY_VARS = {
    "servicebus_namespace": "sb-shop.servicebus.windows.net",
    "storage_account_name": "stshop",
}


def load_bundle(target: str, deploy_vars: dict[str, str] = DEPLOY_VARS) -> dict[str, Any]:
    """databricks.yml with its includes merged, the target's overrides and the ``--var``
    values applied; a variable without a default needs a ``--var``, as in a deploy."""
    root = yaml.safe_load((BUNDLE / "databricks.yml").read_text())
    for pattern in root.get("include", []):
        for path in sorted(glob.glob(str(BUNDLE / pattern))):
            included = yaml.safe_load(Path(path).read_text())
            for kind, items in included.get("resources", {}).items():
                root.setdefault("resources", {}).setdefault(kind, {}).update(items)
    variables = {name: spec.get("default") for name, spec in root.get("variables", {}).items()}
    variables.update(root["targets"][target].get("variables", {}))
    variables.update(deploy_vars)
    missing = [name for name, value in variables.items() if value is None]
    if missing:
        raise KeyError(f"no value for the bundle variable(s) {', '.join(missing)}")
    return _substitute(
        root,
        {
            **{f"var.{k}": v for k, v in variables.items()},
            "bundle.name": root["bundle"]["name"],
            "bundle.target": target,
            "workspace.current_user.userName": DEPLOYER,
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
    # The bundle's values are plain data once loaded; the models type them as "value or
    # ${var}" unions, which a loaded bundle has already resolved.
    job: Any = jobs.Job.from_dict(bundle["resources"]["jobs"]["product_import"])
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


@pytest.mark.parametrize("target", ["dev", "prod"])
def test_the_connections_are_identity_based_with_the_service_principal_of_the_secret_scope(
    target: str,
) -> None:
    # The namespace has local (SAS) auth off and the storage account shared keys off.
    bundle = load_bundle(target)
    env = bundle["resources"]["jobs"]["product_import"]["job_clusters"][0]["new_cluster"][
        "spark_env_vars"
    ]

    assert env == {
        "ServiceBusConnection__fullyQualifiedNamespace": "sb-shop.servicebus.windows.net",
        "AzureWebJobsStorage__accountName": "stshop",
        "AZURE_CLIENT_ID": "{{secrets/servicebus-pipelines/azure-client-id}}",
        "AZURE_TENANT_ID": "{{secrets/servicebus-pipelines/azure-tenant-id}}",
        "AZURE_CLIENT_SECRET": "{{secrets/servicebus-pipelines/azure-client-secret}}",
    }


@pytest.mark.parametrize("target", ["dev", "prod"])
def test_the_workspace_host_comes_from_the_environment_not_the_bundle(target: str) -> None:
    # The CLI refuses a bundle host that differs from DATABRICKS_HOST ("config host mismatch").
    assert "host" not in load_bundle(target)["targets"][target].get("workspace", {})


def test_the_namespace_and_the_storage_account_must_be_given_at_deploy() -> None:
    with pytest.raises(KeyError, match="servicebus_namespace, storage_account_name"):
        load_bundle("prod", deploy_vars={})


@pytest.mark.parametrize("target", ["dev", "prod"])
def test_the_job_sends_to_the_import_queue_that_infra_creates(target: str) -> None:
    # infra/main.bicep creates the queues of infra/app-resources.json
    pipelines = json.loads((BUNDLE.parent / "infra" / "app-resources.json").read_text())[
        "pipelines"
    ]
    infra_queue = next(p["queue"] for p in pipelines if p["name"] == PRODUCT_IMPORT)
    bundle = load_bundle(target)
    parameters = bundle["resources"]["jobs"]["product_import"]["tasks"][0]["python_wheel_task"][
        "parameters"
    ]

    assert parameters[parameters.index("--queue") + 1] == infra_queue


def test_the_job_runs_on_the_current_lts_whose_spark_minor_the_tests_run() -> None:
    import pyspark

    cluster = load_bundle("prod")["resources"]["jobs"]["product_import"]["job_clusters"][0]
    runtime = re.fullmatch(r"(\d+\.\d+)\.x-scala2\.1[23]", cluster["new_cluster"]["spark_version"])

    assert runtime, cluster["new_cluster"]["spark_version"]
    assert runtime.group(1) == max(LTS_SPARK, key=lambda v: tuple(map(int, v.split("."))))
    assert ".".join(pyspark.__version__.split(".")[:2]) == LTS_SPARK[runtime.group(1)]


def test_the_job_says_why_it_needs_classic_compute() -> None:
    job = load_bundle("prod")["resources"]["jobs"]["product_import"]
    text = (BUNDLE / "resources" / "product_import.job.yml").read_text()

    assert "new_cluster" in job["job_clusters"][0]  # classic jobs compute, not serverless
    assert "environments" not in job
    assert "Classic jobs compute, not serverless" in text


def test_only_the_deployer_can_write_the_production_bundle() -> None:
    workspace = load_bundle("prod")["targets"]["prod"]["workspace"]

    assert workspace["root_path"].startswith(f"/Workspace/Users/{DEPLOYER}/")
