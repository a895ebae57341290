"""The product import: one ImportProduct task per catalogue row, a bad row set aside while the
rest of the session goes on; the trigger takes a session's rows in batches and upserts a batch's
good rows together. Sent by the Spark job (``spark_jobs/product_import``), followed at
``GET /api/imports/{job_id}`` (``shared.entrypoints.imports_http``, with its row counts)."""

from __future__ import annotations

from ...domain.pipelines import IMPORT_PRODUCT, PRODUCT_IMPORT, FailurePolicy
from ...domain.products import parse_product
from ..import_tasks import import_batch_tasks, import_tasks
from ..observers import import_progress_observer
from . import Pipeline

PIPELINE = Pipeline(
    name=PRODUCT_IMPORT,
    tasks=(IMPORT_PRODUCT,),
    policy=FailurePolicy.CONTINUE_ON_FAILURE,
    queue_setting="IMPORT_QUEUE_NAME",
    default_queue="product-import-tasks",
    check_payload=parse_product,
    build_tasks=lambda c: import_tasks(c.catalog),
    observer=lambda c: import_progress_observer(c.import_progress),
    batch=lambda c: import_batch_tasks(c.catalog),
    batch_triggers=4,
    route="imports",
    own_routes=True,
    listed=20,
)
