"""The pipelines this app runs, each declaration wired to its tasks: the one list.

Written by ``python -m localdev.derived`` from the declarations in shared/domain/pipelines/
(each wired to its tasks module, shared/service_layer/<name>_tasks.py, and to the Table
adapters its builders ask for, shared/adapters/table_<parameter>.py); ``--check`` names this
file when it is stale. docs/pipelines.md is the guide."""

from __future__ import annotations

from ..domain.pipelines import product_import, purchase
from ..service_layer import product_import_tasks, purchase_tasks
from .wiring import Wired

WIRED = (
    Wired.of(purchase.PIPELINE, purchase_tasks),
    Wired.of(product_import.PIPELINE, product_import_tasks),
)
