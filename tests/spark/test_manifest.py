"""The job manifest in a real Azurite table, read back as the function app reads it."""

from __future__ import annotations

import os
import uuid

import pytest

from shared.adapters.azure_clients import table_service
from shared.config import StorageConnectionSettings
from spark_jobs.product_import.manifest import (
    IMPORT_JOBS_TABLE,
    JobManifest,
    ManifestNotFound,
    TableManifestStore,
)


@pytest.fixture(scope="module")
def table(azurite_connection_string: str) -> object:
    service = table_service(StorageConnectionSettings(connection_string=azurite_connection_string))
    return service.create_table(f"importjobs{uuid.uuid4().hex[:8]}")


@pytest.mark.integration
def test_a_saved_manifest_is_read_back_and_a_rerun_replaces_it(table) -> None:
    store = TableManifestStore(table)
    manifest = JobManifest(
        job_id="cat/2026#11",  # characters a table key cannot hold as they are
        queue_name="product-import-tasks",
        rows_read=10,
        rows_rejected=1,
        rows_sent=9,
        sessions={"cat/2026#11-0000": 5, "cat/2026#11-0001": 4},
    )

    store.save(manifest)
    store.save(manifest)

    assert store.get("cat/2026#11") == manifest
    assert len(list(table.list_entities())) == 1
    assert manifest.to_dict()["session_count"] == 2


@pytest.mark.integration
def test_a_manifest_of_thousands_of_sessions_fits_in_one_entity(table) -> None:
    sessions = {f"big-job-{k:04d}": 1000 for k in range(3000)}
    manifest = JobManifest("big-job", "q", 3_000_000, 0, 3_000_000, sessions)

    TableManifestStore(table).save(manifest)

    assert TableManifestStore(table).get("big-job").sessions == sessions


@pytest.mark.integration
def test_getting_an_unknown_job_raises(table) -> None:
    with pytest.raises(ManifestNotFound):
        TableManifestStore(table).get("never-ran")


@pytest.mark.integration
def test_saving_the_manifest_needs_no_pyspark_and_reads_the_storage_setting_by_name(
    azurite_connection_string: str,
) -> None:
    # The driver saves the manifest after Spark ran, with the settings the CLI read.
    import subprocess
    import sys

    code = "import sys\nsys.modules['pyspark'] = None\n"
    code += "from spark_jobs.product_import.__main__ import save_manifest\n"
    code += "from shared.config import storage_connection\n"
    code += "from spark_jobs.product_import.manifest import JobManifest\n"
    code += "manifest = JobManifest('no-blob', 'q', 3, 1, 2)\n"
    code += "save_manifest(storage_connection('STORAGE'), manifest)\n"
    env = {**os.environ, "STORAGE": azurite_connection_string}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)

    service = table_service(StorageConnectionSettings(connection_string=azurite_connection_string))
    saved = TableManifestStore(service.get_table_client(IMPORT_JOBS_TABLE)).get("no-blob")
    assert (saved.rows_read, saved.rows_rejected, saved.rows_sent) == (3, 1, 2)
