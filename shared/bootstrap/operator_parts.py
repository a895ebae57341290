"""The real adapters of the operator's records (the audit trail, confirmations, pauses, timer
runs, the purge, the dead letters waiting), each built from the clients it needs, for the
container; imported on first use, as ``parts`` are."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from azure.data.tables import TableServiceClient
    from azure.servicebus import ServiceBusClient
    from azure.storage.blob import BlobServiceClient

    from ..adapters.servicebus_waiting import ServiceBusDeadLetterCounter
    from ..adapters.table_audit import TableAuditTrail
    from ..adapters.table_confirmations import TableConfirmations
    from ..adapters.table_pipeline_pauses import TablePipelinePauses
    from ..adapters.table_retention import TableRetention
    from ..adapters.table_timer_runs import TableTimerRuns


def audit_trail(tables: TableServiceClient) -> TableAuditTrail:
    from ..adapters.table_audit import AUDIT_TABLE, TableAuditTrail

    return TableAuditTrail(tables.get_table_client(AUDIT_TABLE))


def confirmations(tables: TableServiceClient) -> TableConfirmations:
    from ..adapters.table_confirmations import CONFIRMATIONS_TABLE, TableConfirmations

    return TableConfirmations(tables.get_table_client(CONFIRMATIONS_TABLE))


def pipeline_pauses(tables: TableServiceClient) -> TablePipelinePauses:
    from ..adapters.table_pipeline_pauses import PIPELINE_PAUSES_TABLE, TablePipelinePauses

    return TablePipelinePauses(tables.get_table_client(PIPELINE_PAUSES_TABLE))


def timer_runs(tables: TableServiceClient) -> TableTimerRuns:
    from ..adapters.table_timer_runs import TIMER_RUNS_TABLE, TableTimerRuns

    return TableTimerRuns(tables.get_table_client(TIMER_RUNS_TABLE))


def retention(
    tables: TableServiceClient, blobs: BlobServiceClient, pipeline_tables: Sequence[str]
) -> TableRetention:
    """The purge's adapter over the app's tables (its own and ``pipeline_tables``, those its
    pipelines declare) and containers."""
    from ..adapters.azure_clients import APP_CONTAINERS, CORE_TABLES
    from ..adapters.table_retention import TableRetention

    names = dict.fromkeys((*CORE_TABLES, *pipeline_tables))
    return TableRetention(
        {name: tables.get_table_client(name) for name in names},
        {name: blobs.get_container_client(name) for name in APP_CONTAINERS},
    )


def dead_letter_counter(client: ServiceBusClient) -> ServiceBusDeadLetterCounter:
    from ..adapters.servicebus_waiting import ServiceBusDeadLetterCounter

    return ServiceBusDeadLetterCounter(client)
