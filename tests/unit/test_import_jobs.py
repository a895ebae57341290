"""The status of a product import job from its manifest and the rows the tasks recorded."""

from __future__ import annotations

import pytest

from shared.domain.import_jobs import (
    ImportJobNotFound,
    JobManifest,
    import_job_status,
)
from shared.service_layer.imports import get_import_status
from tests.fakes import InMemoryImportManifests, InMemoryImportProgress

MANIFEST = JobManifest(
    job_id="cat-1",
    queue_name="product-import-tasks",
    rows_read=10,
    rows_rejected=2,
    rows_sent=8,
    sessions={"cat-1-0000": 4, "cat-1-0001": 4},
    source="abfss://imports/cat-1.csv",
)


def test_a_job_whose_sent_rows_all_have_an_outcome_is_completed() -> None:
    status = import_job_status("cat-1", MANIFEST, {"imported": 7, "failed": 1})

    assert status.status == "completed"
    assert (status.rows_read, status.rows_rejected, status.rows_sent) == (10, 2, 8)
    assert (status.rows_imported, status.rows_failed, status.rows_pending) == (7, 1, 0)
    assert status.sessions == 2
    assert status.source == "abfss://imports/cat-1.csv"


def test_a_job_with_rows_still_in_the_queue_is_importing() -> None:
    status = import_job_status("cat-1", MANIFEST, {"imported": 3})

    assert (status.status, status.rows_pending) == ("importing", 5)


def test_rows_imported_before_the_manifest_is_saved_show_a_job_still_sending() -> None:
    status = import_job_status("cat-1", None, {"imported": 2, "failed": 1})

    assert status.status == "sending"
    assert (status.rows_imported, status.rows_failed) == (2, 1)
    assert status.rows_read is status.rows_sent is status.rows_pending is None


def test_a_job_nothing_knows_of_is_not_found() -> None:
    with pytest.raises(ImportJobNotFound, match="'nope'"):
        import_job_status("nope", None, {})


def test_the_service_reads_the_manifest_and_the_counts_of_the_same_job() -> None:
    manifests, progress = InMemoryImportManifests(), InMemoryImportProgress()
    manifests.save(MANIFEST)
    for step in range(1, 5):
        for session in MANIFEST.sessions:
            progress.record("cat-1", session, step, status="imported", reason=None)
    progress.record("cat-1", "cat-1-0001", 4, status="failed", reason="InvalidRow")  # again
    progress.record("other", "other-0000", 1, status="failed", reason="InvalidRow")

    status = get_import_status(manifests, progress, "cat-1")

    assert (status.status, status.rows_imported, status.rows_failed) == ("completed", 7, 1)
    assert get_import_status(manifests, progress, "other").status == "sending"
    with pytest.raises(ImportJobNotFound):
        get_import_status(manifests, progress, "nope")


def test_re_sends_of_retried_spark_tasks_do_not_keep_a_job_pending_forever() -> None:
    # A retried task re-sent 3 rows; the queue dropped them as duplicates.
    resent = JobManifest("cat-1", "q", rows_read=10, rows_rejected=2, rows_sent=11)

    status = import_job_status("cat-1", resent, {"imported": 8})

    assert (status.status, status.rows_pending, status.rows_sent) == ("completed", 0, 11)


def test_a_row_that_failed_then_imported_on_replay_counts_once_as_imported() -> None:
    from shared.domain.pipelines import import_message
    from shared.service_layer.observers import import_progress_observer
    from shared.service_layer.processor import IncomingMessage, Outcome

    progress = InMemoryImportProgress()
    observe = import_progress_observer(progress)
    row = import_message("job-9", 3, is_last=False, row={"sku": "A"})
    props = dict(row.application_properties())

    observe(
        IncomingMessage(row.to_json(), "job-9-0000", application_properties=props),
        row,
        Outcome.DEAD_LETTERED,
        "X",
    )
    assert progress.counts("job-9") == {"failed": 1}
    replayed = {**props, "replay_of": "job-9-0000"}
    observe(
        IncomingMessage(row.to_json(), "replay-1", application_properties=replayed),
        row,
        Outcome.COMPLETED,
        None,
    )

    assert progress.counts("job-9") == {"imported": 1}
