"""The CLI: settings read from the environment by name, manifest saved and printed as JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from localdev.azurite import run_azurite
from shared.adapters.azure_clients import table_service
from shared.config import ConfigurationError, StorageConnectionSettings
from spark_jobs.product_import.__main__ import executors_run_this_python, main
from spark_jobs.product_import.manifest import IMPORT_JOBS_TABLE, TableManifestStore

from .catalogues import product, write_csv
from .queues import QUEUE, assert_arrived_once_in_order, drain

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.integration
def test_the_cli_prints_and_saves_the_manifest(spark, tmp_path, monkeypatch, capsys) -> None:
    # Every row is unparseable, so nothing is sent and no Service Bus is needed.
    path = write_csv(tmp_path / "c.csv", 2, broken_lines={1: "a,b", 2: "c"})
    with run_azurite() as azurite:
        monkeypatch.setenv(
            "ServiceBusConnection", "Endpoint=sb://unused/;SharedAccessKeyName=k;SharedAccessKey=v"
        )
        monkeypatch.setenv("AzureWebJobsStorage", azurite.connection_string)

        code = main(
            ["--input", str(path), "--format", "csv", "--job-id", "cli-1", "--sessions", "2",
             "--queue", "product-import-tasks", "--connection-setting", "ServiceBusConnection",
             "--storage-setting", "AzureWebJobsStorage", "--rejects-path", str(tmp_path / "r")]
        )  # fmt: skip

        printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        service = table_service(
            StorageConnectionSettings(connection_string=azurite.connection_string)
        )
        saved = TableManifestStore(service.get_table_client(IMPORT_JOBS_TABLE)).get("cli-1")

    assert code == 0
    assert (printed["rows_read"], printed["rows_rejected"], printed["rows_sent"]) == (2, 2, 0)
    assert saved.rows_rejected == 2


def test_a_missing_connection_setting_fails_with_its_name(monkeypatch) -> None:
    monkeypatch.delenv("NoSuchSetting", raising=False)
    monkeypatch.delenv("NoSuchSetting__fullyQualifiedNamespace", raising=False)
    with pytest.raises(ConfigurationError, match="NoSuchSetting"):
        main(["--input", "x", "--format", "csv", "--job-id", "j", "--queue", "q",
              "--connection-setting", "NoSuchSetting"])  # fmt: skip


def test_the_executors_run_the_drivers_python_unless_told_otherwise() -> None:
    environ: dict[str, str] = {}
    executors_run_this_python(environ)
    assert environ == {"PYSPARK_PYTHON": sys.executable}

    told = {"PYSPARK_PYTHON": "/opt/cluster/python3"}
    executors_run_this_python(told)
    assert told == {"PYSPARK_PYTHON": "/opt/cluster/python3"}


@pytest.mark.integration
def test_the_command_as_a_user_types_it_sends_every_row_and_reports_progress(
    connection_string, tmp_path
) -> None:
    """No PYSPARK_PYTHON, and a PATH whose python3 is the system's, without the job's
    packages: as in a shell where the virtual environment is not activated."""
    path = write_csv(tmp_path / "c.csv", 30)
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("PYSPARK_") and name != "VIRTUAL_ENV"
    }
    env.update(
        PATH="/usr/bin:/bin",
        SPARK_LOCAL_IP="127.0.0.1",
        ServiceBusConnection=connection_string,
    )

    done = subprocess.run(
        [sys.executable, "-m", "spark_jobs.product_import", "--input", str(path),
         "--format", "csv", "--job-id", "cli-2", "--sessions", "2", "--queue", QUEUE,
         "--master", "local[2]"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["rows_sent"] == 30
    assert "job cli-2: 30 of 30 rows sent (100%)" in done.stderr
    expected = [product(i)["sku"] for i in range(1, 31)]
    assert_arrived_once_in_order(drain(connection_string), "cli-2", expected)
