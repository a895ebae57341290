"""A product import is one trace, through the whole local stack exporting to a real OTLP/HTTP
endpoint: the Spark job's command (local Spark, its own process, exporting to the same
endpoint) starts the trace, and each import task the function app runs for one of its rows is
a child of the job's span."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from spark_jobs.product_import.columns import FIELDS
from tests.spark.command import run_job_command

from .conftest import E2E, wait_for

pytestmark = pytest.mark.e2e


def test_the_import_tasks_of_a_spark_job_are_in_the_jobs_trace(e2e: E2E, tmp_path: Path) -> None:
    job = f"traced-{uuid.uuid4().hex[:8]}"
    rows = [[f"{job}-{i}", f"Product {i}", f"{i}.50", "EUR", ""] for i in range(1, 7)]
    rows[2][2] = ""  # no price: the app dead-letters the row, in the job's trace too
    catalogue = tmp_path / "catalogue.csv"
    catalogue.write_text("\n".join(",".join(r) for r in [list(FIELDS), *rows]) + "\n")

    manifest = run_job_command(
        ["--input", str(catalogue), "--format", "csv", "--job-id", job, "--sessions", "2",
         "--queue", e2e.import_queue, "--storage-setting", "AzureWebJobsStorage"],
        {
            "ServiceBusConnection": e2e.stack.servicebus_connection_string,
            "AzureWebJobsStorage": e2e.stack.storage_connection_string,
            "OTEL_EXPORTER_OTLP_ENDPOINT": e2e.otlp.endpoint,
        },
    )  # fmt: skip

    def completed() -> dict | None:
        status = e2e.api.import_status(job)
        return status if status and status["status"] == "completed" else None

    status = wait_for(completed, what=f"import {job} completed")
    assert (status["rows_imported"], status["rows_failed"]) == (5, 1)

    def task_spans() -> list | None:
        e2e.exported()
        found = [
            s
            for s in e2e.otlp.spans()
            if s.attributes.get("pipeline") == "product_import"
            and str(s.attributes.get("session.id", "")).startswith(f"{job}-")
        ]
        return found if len(found) >= len(rows) else None

    tasks = wait_for(task_spans, what=f"the {len(rows)} import task spans of {job}")
    (job_span,) = [s for s in e2e.otlp.spans() if s.name == f"product import {job}"]
    assert job_span.parent_span_id == ""
    assert manifest["trace_id"] == job_span.trace_id
    assert {s.trace_id for s in tasks} == {job_span.trace_id}
    assert {s.parent_span_id for s in tasks} == {job_span.span_id}
    assert sorted(str(s.attributes["messaging.message.id"]) for s in tasks) == sorted(
        f"{job}:{i}" for i in range(1, 7)
    )
    assert [s.attributes["outcome"] for s in tasks].count("dead-lettered") == 1
