"""The purge's deletes in Table and Blob Storage (``RetentionStore``): each kind of record found
by a filtered query (the columns its age and state are read from, no more), then deleted in
entity group transactions of at most 100 rows of one partition (Table Storage's limit, which
Azurite also needs kept) and in Blob batch deletes of at most 256 blobs (the service's limit per
batch: https://learn.microsoft.com/rest/api/storageservices/blob-batch).

A transaction that finds a row gone (another purge, or a row deleted in between) fails whole
(404); its rows are then deleted one by one, which succeeds for a row already gone, as does a
blob delete that finds nothing (``delete_blobs`` reports each result). Budget: between two
batches (two sessions, two jobs) the purge stops once ``time.monotonic()`` passes ``until``.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..domain.archive import REPLAYED
from ..domain.import_jobs import import_job_status
from ..domain.order_status import OrderRecord, order_status
from ..domain.payments import payment_idempotency_key
from ..domain.pipelines import PURCHASE_TASKS
from ..domain.retention import Keep
from ..service_layer.operator_ports import Purged
from .azure_clients import (
    DEAD_LETTER_BODIES_CONTAINER,
    DEAD_LETTERS_TABLE,
    FAILED_SESSIONS_TABLE,
    IDEMPOTENCY_TABLE,
    IMPORT_PROGRESS_TABLE,
    ORDER_NUMBERS_TABLE,
    ORDER_PROGRESS_TABLE,
    PAYMENTS_TABLE,
    RECEIPTS_CONTAINER,
    REPLAY_REQUESTS_TABLE,
)
from .azure_errors import TABLE_STORAGE, translated
from .blob_receipts import receipt_blob_name
from .table_audit import AUDIT_TABLE
from .table_confirmations import CONFIRMATIONS_TABLE
from .table_deletes import KEYS, Counts, TableDeletes, key_of
from .table_failed_sessions import SUMMARY_ROW
from .table_import_manifests import IMPORT_JOBS_TABLE, manifest_of
from .table_import_progress import TableImportProgress
from .table_keys import table_key
from .table_order_numbers import allocation_keys
from .table_order_progress import order_record
from .table_session_outcomes import SESSION_OUTCOMES_TABLE

PARALLEL_JOBS = 8  # jobs purged at a time


class TableRetention(TableDeletes):
    """Implements RetentionStore over the app's tables and containers, by their names (the
    constants of ``azure_clients`` and the adapters)."""

    # -- records with a time of their own -----------------------------------------------------

    @translated(TABLE_STORAGE)
    def purge_idempotency_keys(self, before: str, until: float) -> Purged:
        return self._purge_where(IDEMPOTENCY_TABLE, "started_at lt @before", before, until)

    @translated(TABLE_STORAGE)
    def purge_confirmations(self, before: str, until: float) -> Purged:
        return self._purge_where(CONFIRMATIONS_TABLE, "expires_at lt @before", before, until)

    @translated(TABLE_STORAGE)
    def purge_replay_requests(self, before: str, until: float) -> Purged:
        where = "updated_at lt @before and ( status eq 'completed' or status eq 'failed' )"
        return self._purge_where(REPLAY_REQUESTS_TABLE, where, before, until)

    @translated(TABLE_STORAGE)
    def purge_audit(self, before: str, until: float) -> Purged:
        return self._purge_where(AUDIT_TABLE, "at lt @before", before, until)

    def _purge_where(self, table: str, where: str, before: str, until: float) -> Purged:
        client = self._tables[table]
        found = client.query_entities(
            where, parameters={"before": before}, select=KEYS, results_per_page=1000
        )
        deleted, finished = self._delete_rows(client, (key_of(e) for e in found), until)
        return Purged({table: deleted}, finished)

    # -- failed sessions ------------------------------------------------------------------------

    @translated(TABLE_STORAGE)
    def purge_sessions(self, status: str, before: str, keep: Keep, until: float) -> Purged:
        if status == REPLAYED:
            where = "RowKey eq @row and status eq 'replayed' and replayed_at lt @before"
        else:
            where = "RowKey eq @row and claim_action eq 'resolve' and claimed_at lt @before"
        summaries = self._tables[FAILED_SESSIONS_TABLE].query_entities(
            where,
            parameters={"row": SUMMARY_ROW, "before": before},
            select=["PartitionKey", "RowKey", "job_id"],
        )
        deleted = Counts()
        for summary in summaries:
            if self._monotonic() >= until:
                return Purged(deleted.counts, False)
            self._purge_session(summary, keep, deleted)
        return Purged(deleted.counts, True)

    def _purge_session(self, summary: Any, keep: Keep, deleted: Counts) -> None:
        """The session's archived messages and their blobs, then its summary; nothing of a
        session whose job is kept."""
        rows_table = self._tables[DEAD_LETTERS_TABLE]
        rows = list(
            rows_table.query_entities(
                "PartitionKey eq @pk",
                parameters={"pk": summary["PartitionKey"]},
                select=["PartitionKey", "RowKey", "job_id", "body_blob"],
            )
        )
        jobs = {summary.get("job_id")} | {row.get("job_id") for row in rows}
        if jobs & keep.jobs:
            return
        blobs = [str(row["body_blob"]).split("/", 1)[1] for row in rows if row.get("body_blob")]
        deleted.add(
            DEAD_LETTER_BODIES_CONTAINER, self._delete_blobs(DEAD_LETTER_BODIES_CONTAINER, blobs)
        )
        deleted.add(DEAD_LETTERS_TABLE, self._delete_rows(rows_table, map(key_of, rows))[0])
        summaries = self._tables[FAILED_SESSIONS_TABLE]
        deleted.add(FAILED_SESSIONS_TABLE, self._delete_rows(summaries, [key_of(summary)])[0])

    # -- jobs -----------------------------------------------------------------------------------

    @translated(TABLE_STORAGE)
    def purge_jobs(self, before: str, keep: Keep, until: float) -> Purged:
        deleted = Counts()
        seen: set[str] = set()  # partitions of the session outcomes already decided
        for step in (self._purge_orders, self._purge_imports, self._purge_outcomes):
            if not step(before, keep, until, deleted, seen):
                return Purged(deleted.counts, False)
        return Purged(deleted.counts, True)

    def _purge_orders(
        self, before: str, keep: Keep, until: float, deleted: Counts, seen: set[str]
    ) -> bool:
        """Orders that completed or failed (as their latest session ended, or the steps an
        earlier release recorded tell), nothing recorded of them since ``before``: the charge,
        the receipt, the order number's allocation, the outcomes, then the progress. The
        orders accepted before ``before`` are found first (only their keys are read), then
        each one's rows; ``PARALLEL_JOBS`` orders are purged at a time."""
        progress = self._tables[ORDER_PROGRESS_TABLE]
        old = progress.query_entities(
            "at lt @before", parameters={"before": before}, select=["PartitionKey"]
        )
        expired = []
        for partition in dict.fromkeys(str(e["PartitionKey"]) for e in old):
            seen.add(partition)
            rows = list(
                progress.query_entities("PartitionKey eq @pk", parameters={"pk": partition})
            )
            if not rows:
                continue
            record = order_record(partition, sorted(rows, key=lambda r: str(r["RowKey"])))
            ended = list(
                self._tables[SESSION_OUTCOMES_TABLE].query_entities(
                    "PartitionKey eq @pk", parameters={"pk": partition}
                )
            )
            status = _order_status(record, ended)
            last = max(str(row.get("at") or "") for row in [*rows, *ended])
            if (
                status in ("completed", "failed")
                and last < before
                and record.job_id not in keep.jobs
            ):
                expired.append((record.job_id, rows, ended))
        return self._each(
            expired, lambda order: self._purge_order(*order, keep=keep, deleted=deleted), until
        )

    def _each(self, items: list[Any], purge: Callable[[Any], None], until: float) -> bool:
        """``purge`` each item, ``PARALLEL_JOBS`` at a time (each is a few requests to other
        partitions, mostly waiting); False when ``until`` passed before the last."""
        with ThreadPoolExecutor(PARALLEL_JOBS, thread_name_prefix="purge") as pool:
            for start in range(0, len(items), PARALLEL_JOBS):
                if self._monotonic() >= until:
                    return False
                list(pool.map(purge, items[start : start + PARALLEL_JOBS]))
        return True

    def _purge_order(
        self, job_id: str, rows: list[Any], ended: list[Any], *, keep: Keep, deleted: Counts
    ) -> None:
        """``rows``: the order's progress, ``ended``: its sessions' outcomes, as read."""
        numbers = self._tables[ORDER_NUMBERS_TABLE]
        allocations = [
            entity
            for pk, rk in allocation_keys(job_id)
            for entity in numbers.query_entities(
                "PartitionKey eq @pk and RowKey eq @rk", parameters={"pk": pk, "rk": rk}
            )
        ]
        receipts = [
            receipt_blob_name(str(a["OrderNumber"]))
            for a in allocations
            if a.get("OrderNumber") and str(a["OrderNumber"]) not in keep.order_numbers
        ]
        deleted.add(RECEIPTS_CONTAINER, self._delete_blobs(RECEIPTS_CONTAINER, receipts))
        charge = (table_key(payment_idempotency_key(job_id)), "charge")
        deleted.add(PAYMENTS_TABLE, self._delete_present(PAYMENTS_TABLE, [charge]))
        deleted.add(ORDER_NUMBERS_TABLE, self._delete_rows(numbers, map(key_of, allocations))[0])
        outcomes = self._tables[SESSION_OUTCOMES_TABLE]
        deleted.add(SESSION_OUTCOMES_TABLE, self._delete_rows(outcomes, map(key_of, ended))[0])
        deleted.add(
            ORDER_PROGRESS_TABLE,
            self._delete_rows(self._tables[ORDER_PROGRESS_TABLE], map(key_of, rows))[0],
        )

    def _purge_imports(
        self, before: str, keep: Keep, until: float, deleted: Counts, seen: set[str]
    ) -> bool:
        """Import jobs whose every row was imported or failed, their manifest last saved
        before ``before``: the row outcomes, the sessions' outcomes, then the manifest."""
        manifests = self._tables[IMPORT_JOBS_TABLE]
        progress = TableImportProgress(self._tables[IMPORT_PROGRESS_TABLE])
        for entity in manifests.query_entities("RowKey eq @row", parameters={"row": "manifest"}):
            seen.add(str(entity["PartitionKey"]))
            manifest = manifest_of(entity)
            stamp = entity.metadata.get("timestamp")
            saved = stamp.isoformat() if stamp is not None else ""
            if saved >= before or manifest.job_id in keep.jobs:
                continue
            counts = progress.counts(manifest.job_id)
            if import_job_status(manifest.job_id, manifest, counts).status != "completed":
                continue
            if self._monotonic() >= until:
                return False
            rows = self._tables[IMPORT_PROGRESS_TABLE]
            found = rows.query_entities(
                _IMPORT_ROWS, parameters=_import_rows(manifest.job_id), select=KEYS
            )
            deleted.add(IMPORT_PROGRESS_TABLE, self._delete_rows(rows, map(key_of, found))[0])
            deleted.add(
                SESSION_OUTCOMES_TABLE,
                self._delete_partition(SESSION_OUTCOMES_TABLE, str(entity["PartitionKey"])),
            )
            deleted.add(IMPORT_JOBS_TABLE, self._delete_rows(manifests, [key_of(entity)])[0])
        return True

    def _purge_outcomes(
        self, before: str, keep: Keep, until: float, deleted: Counts, seen: set[str]
    ) -> bool:
        """Jobs of the other pipelines: every session ended, the last before ``before``."""
        outcomes = self._tables[SESSION_OUTCOMES_TABLE]
        old = outcomes.query_entities(
            "at lt @before", parameters={"before": before}, select=["PartitionKey"]
        )
        expired = []
        for partition in dict.fromkeys(str(e["PartitionKey"]) for e in old):
            if partition in seen:
                continue
            rows = list(
                outcomes.query_entities(
                    "PartitionKey eq @pk",
                    parameters={"pk": partition},
                    select=["PartitionKey", "RowKey", "job_id", "status", "at"],
                )
            )
            if not rows or any(r.get("job_id") in keep.jobs for r in rows):
                continue
            ended = all(r.get("status") in ("completed", "failed") for r in rows)
            if ended and max(str(r.get("at") or "") for r in rows) < before:
                expired.append(rows)
        return self._each(
            expired,
            lambda rows: deleted.add(
                SESSION_OUTCOMES_TABLE, self._delete_rows(outcomes, map(key_of, rows))[0]
            ),
            until,
        )


_IMPORT_ROWS = "PartitionKey eq @legacy or ( PartitionKey ge @low and PartitionKey lt @high )"


def _import_rows(job_id: str) -> dict[str, str]:
    """The partitions of a job's row outcomes, as ``TableImportProgress.counts`` reads them:
    the job's own (rows recorded before sessions had partitions of their own) and every
    ``<job key>~~<session key>``."""
    prefix = f"{table_key(job_id)}~~"
    return {"legacy": table_key(job_id), "low": prefix, "high": prefix[:-1] + chr(ord("~") + 1)}


def _order_status(record: OrderRecord, ended: list[Any]) -> str:
    """Where an order stands by how its latest session ended, else by its recorded steps."""
    latest: Any = max(ended, key=lambda row: (str(row.get("at")), row["RowKey"]), default={})
    if latest.get("status") in ("completed", "failed"):
        return str(latest["status"])
    none: Any = {"order_number": None, "charged": None, "failure": None, "claim": None}
    return order_status(record, PURCHASE_TASKS, **none).status
