"""The job manifest in a real Azurite table, read back as the function app reads it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from localdev.azurite import AzuriteError, run_azurite
from shared.adapters.azure_clients import table_service
from shared.config import StorageConnectionSettings
from spark_jobs.product_import.manifest import JobManifest, ManifestNotFound, TableManifestStore


@pytest.fixture(scope="module")
def table() -> Iterator[object]:
    try:
        with run_azurite() as azurite:
            service = table_service(
                StorageConnectionSettings(connection_string=azurite.connection_string)
            )
            yield service.create_table(f"importjobs{uuid.uuid4().hex[:8]}")
    except AzuriteError as error:
        pytest.fail(str(error), pytrace=False)


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


def test_the_manifest_module_does_not_need_pyspark() -> None:
    import subprocess
    import sys

    code = "import sys; sys.modules['pyspark'] = None\nimport spark_jobs.product_import.manifest\n"
    subprocess.run([sys.executable, "-c", code], check=True)
