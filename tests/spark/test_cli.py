"""The CLI: settings read from the environment by name, manifest saved and printed as JSON."""

from __future__ import annotations

import json

import pytest

from localdev.azurite import run_azurite
from shared.adapters.azure_clients import table_service
from shared.config import ConfigurationError, StorageConnectionSettings
from spark_jobs.product_import.__main__ import main
from spark_jobs.product_import.manifest import IMPORT_JOBS_TABLE, TableManifestStore

from .catalogues import write_csv


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
