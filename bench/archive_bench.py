"""Archiving 5,000 dead letters: entity-group transactions vs one row at a time.

Same Azurite, same run, same rows. Run: ``.venv/bin/python -m bench.archive_bench``
(``--rows N --sessions S`` to change the shape). Prints rows/s for both and the ratio; the
goal is at least 3.5x.
"""

from __future__ import annotations

import argparse
import time
import uuid

from bench.proc import load_average, machine_line
from localdev.azurite import run_azurite
from shared.adapters.azure_clients import blob_service, table_service
from shared.adapters.table_archive import TableDeadLetterArchive
from shared.config import StorageConnectionSettings
from shared.domain.archive import ArchivedMessage
from shared.domain.envelope import TaskMessage


def make_rows(total: int, sessions: int) -> dict[str, list[ArchivedMessage]]:
    per_session = total // sessions
    rows: dict[str, list[ArchivedMessage]] = {}
    sequence = 1
    for s in range(sessions):
        session_id = f"bench-{s:04d}-{uuid.uuid4().hex[:6]}"
        for step in range(1, per_session + 1):
            message = TaskMessage(
                job_id=session_id,
                pipeline="product_import",
                task="ImportProduct",
                step=step,
                is_last=step == per_session,
                payload={
                    "sku": f"SKU-{sequence}",
                    "name": "Mug",
                    "price": "9.50",
                    "currency": "EUR",
                },
            )
            rows.setdefault(session_id, []).append(
                ArchivedMessage(
                    queue="product-import-tasks",
                    session_id=session_id,
                    sequence_number=sequence,
                    message_id=message.message_id(),
                    body=message.to_json(),
                    content_type="application/json",
                    application_properties=message.application_properties(),
                    reason="InvalidProduct:price",
                    description="price is missing",
                    enqueued_time="2026-11-23T09:00:00+00:00",
                    delivery_count=1,
                    archived_at="2026-11-23T09:05:00+00:00",
                    job_id=session_id,
                    task="ImportProduct",
                    step=step,
                    is_last=step == per_session,
                )
            )
            sequence += 1
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--sessions", type=int, default=50)
    args = parser.parse_args()
    rows = make_rows(args.rows, args.sessions)
    total = sum(len(r) for r in rows.values())
    load_before = load_average()
    with run_azurite() as azurite:
        settings = StorageConnectionSettings(connection_string=azurite.connection_string)
        tables, blobs = table_service(settings), blob_service(settings)
        bodies = blobs.create_container("bench-bodies")
        batched_table = tables.create_table("benchbatched")
        single_table = tables.create_table("benchsingle")
        summaries = tables.create_table("benchsummaries")
        batched = TableDeadLetterArchive(batched_table, summaries, bodies)
        single = TableDeadLetterArchive(single_table, summaries, bodies)

        started = time.perf_counter()
        transactions = sum(batched.save(session_rows) for session_rows in rows.values())
        batched_seconds = time.perf_counter() - started

        started = time.perf_counter()
        for session_rows in rows.values():
            for row in session_rows:  # the naive way: one request per row
                single_table.upsert_entity(single.entity_of(row))
        single_seconds = time.perf_counter() - started

        count = sum(1 for _ in batched_table.list_entities(select=["RowKey"]))
        assert count == total == sum(1 for _ in single_table.list_entities(select=["RowKey"]))
    print(machine_line(load_before, load_average()) + "\n")
    print(
        "| rows | sessions | entity-group transactions | transactions (rows/s) "
        "| one row at a time (rows/s) | transactions / one at a time | goal |"
    )
    print("|---|---|---|---|---|---|---|")
    print(
        f"| {total:,} | {len(rows)} | {transactions} | {total / batched_seconds:,.0f} "
        f"| {total / single_seconds:,.0f} | **{single_seconds / batched_seconds:.1f}x** | ≥ 3.5x |"
    )


if __name__ == "__main__":
    main()
