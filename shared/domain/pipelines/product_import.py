"""The product import: one ImportProduct task per catalogue row, a bad row set aside while the
rest of the session goes on; the trigger takes a session's rows in batches and upserts a batch's
good rows together. Sent by the Spark job (``spark_jobs/product_import``), followed at
``GET /api/imports/{job_id}`` (``shared.entrypoints.imports_http``, with its row counts); its
tasks are ``shared.service_layer.product_import_tasks``."""

from __future__ import annotations

from ..products import parse_product
from . import IMPORT_PRODUCT, PRODUCT_IMPORT, FailurePolicy, Pipeline

PRODUCTS_TABLE = "products"
IMPORT_PROGRESS_TABLE = "importprogress"
IMPORT_JOBS_TABLE = "importjobs"

PIPELINE = Pipeline(
    name=PRODUCT_IMPORT,
    tasks=(IMPORT_PRODUCT,),
    policy=FailurePolicy.CONTINUE_ON_FAILURE,
    queue_setting="IMPORT_QUEUE_NAME",
    default_queue="product-import-tasks",
    check_payload=parse_product,
    route="imports",
    own_routes=True,
    tables=(PRODUCTS_TABLE, IMPORT_PROGRESS_TABLE, IMPORT_JOBS_TABLE),
    batch=True,
    batch_triggers=4,
    listed=20,
)
