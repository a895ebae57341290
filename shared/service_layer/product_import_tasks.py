"""The product import task: one row, validated and upserted (idempotent). In a batch, the
rows are validated one by one and the good ones upserted together (``import_batch_tasks``)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from ..domain.errors import InvalidInput, PermanentTaskError
from ..domain.pipelines import IMPORT_PRODUCT
from ..domain.products import Product, parse_product
from .observers import import_progress_observer
from .ports import ImportProgress, ProductCatalog
from .session_messages import BatchTask, Observer, Task, TaskInvocation


def build_tasks(catalog: ProductCatalog) -> dict[str, Task]:
    """The import's task, from the container's parts (``shared.bootstrap.wiring``)."""
    return import_tasks(catalog)


def build_batch_tasks(catalog: ProductCatalog) -> dict[str, BatchTask]:
    return import_batch_tasks(catalog)


def build_observer(import_progress: ImportProgress) -> Observer:
    """Each row's outcome, for ``GET /api/imports/{job_id}``."""
    return import_progress_observer(import_progress)


def import_tasks(catalog: ProductCatalog) -> dict[str, Task]:
    return {IMPORT_PRODUCT: partial(import_product, catalog)}


def import_batch_tasks(catalog: ProductCatalog) -> dict[str, BatchTask]:
    """ImportProduct in a batch: each row checked, the batch's good rows upserted together."""
    return {IMPORT_PRODUCT: BatchTask(prepare=checked_product, write=catalog.upsert_many)}


def import_product(catalog: ProductCatalog, call: TaskInvocation) -> Mapping[str, Any]:
    catalog.upsert(checked_product(call))
    return {}


def checked_product(call: TaskInvocation) -> Product:
    """The row's product; raises ``PermanentTaskError`` ``InvalidProduct:<field>`` when the
    row breaks a rule."""
    try:
        return parse_product(call.message.payload)
    except InvalidInput as error:
        raise PermanentTaskError(
            f"InvalidProduct:{error.field}",
            f"Row {call.message.step} of import {call.message.job_id}: {error.field} "
            f"{error.problem}. Correct the row and import it again.",
        ) from error
