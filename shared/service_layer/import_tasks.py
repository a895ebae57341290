"""The product import task: one row, validated and upserted (idempotent)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from ..domain.errors import InvalidInput, PermanentTaskError
from ..domain.pipelines import IMPORT_PRODUCT
from ..domain.products import parse_product
from .ports import ProductCatalog
from .session_messages import Task, TaskInvocation


def import_tasks(catalog: ProductCatalog) -> dict[str, Task]:
    return {IMPORT_PRODUCT: partial(import_product, catalog)}


def import_product(catalog: ProductCatalog, call: TaskInvocation) -> Mapping[str, Any]:
    try:
        product = parse_product(call.message.payload)
    except InvalidInput as error:
        raise PermanentTaskError(
            f"InvalidProduct:{error.field}",
            f"Row {call.message.step} of import {call.message.job_id}: {error.field} "
            f"{error.problem}. Correct the row and import it again.",
        ) from error
    catalog.upsert(product)
    return {}
