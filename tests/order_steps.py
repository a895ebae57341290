"""The row earlier releases wrote to ``orderprogress`` for each step of an order (RowKey
``step-<n>``, zero-padded): this release reads such rows (``TableOrderProgress``) and writes
none, so tests that need them write them here, as those releases did."""

from __future__ import annotations

from typing import Any

from azure.data.tables import TableClient, UpdateMode

from shared.adapters.table_keys import table_key
from shared.domain.order_status import StepOutcome


def record_step(table: TableClient, job_id: str, outcome: StepOutcome) -> None:
    """Upsert the latest outcome of one step of ``job_id``, as earlier releases did."""
    entity: dict[str, Any] = {
        "PartitionKey": table_key(job_id),
        "RowKey": f"step-{outcome.step:09d}",
        "step": outcome.step,
        "task": outcome.task,
        "status": outcome.status,
        "session_id": outcome.session_id,
        "at": outcome.at,
    }
    if outcome.reason:
        entity["reason"] = outcome.reason
    table.upsert_entity(entity, mode=UpdateMode.REPLACE)
