"""python -m spark_jobs.product_import --input FILE --format csv --job-id ID --sessions N
--queue NAME --connection-setting ServiceBusConnection [--storage-setting AzureWebJobsStorage]
[--rejects-path DIR]

Connection strings are read from the environment variables the settings name (the Functions
convention), never passed on the command line. Prints the manifest as JSON.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .manifest import JobManifest


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    from .job import FORMATS

    parser = argparse.ArgumentParser(prog="python -m spark_jobs.product_import")
    parser.add_argument("--input", required=True, help="file or directory of the catalogue")
    parser.add_argument("--format", required=True, choices=FORMATS)
    parser.add_argument("--job-id", required=True)
    parser.add_argument("--sessions", type=int, default=None, help="default: from the row count")
    parser.add_argument("--queue", required=True, help="the import queue")
    parser.add_argument("--connection-setting", default="ServiceBusConnection")
    parser.add_argument("--storage-setting", default=None, help="e.g. AzureWebJobsStorage")
    parser.add_argument("--rejects-path", default=None, help="rejects as JSON lines here")
    parser.add_argument("--master", default=None, help="e.g. local[2]; default: the cluster's")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    connection_string = os.environ[args.connection_setting]  # fails at once, by name
    storage = os.environ[args.storage_setting] if args.storage_setting else None

    from pyspark.sql import SparkSession

    from .job import run_import

    builder = SparkSession.builder.appName(f"product-import-{args.job_id}")
    if args.master:
        builder = builder.master(args.master)
    spark = builder.getOrCreate()
    result = run_import(
        spark,
        input_path=args.input,
        fmt=args.format,
        job_id=args.job_id,
        queue_name=args.queue,
        connection_string=connection_string,
        sessions=args.sessions,
        rejects_path=args.rejects_path,
    )
    if storage:
        save_manifest(storage, result.manifest)
    print(result.manifest.to_json())
    return 0


def save_manifest(storage_connection: str, manifest: JobManifest) -> None:
    # Tables only: the wheel installs azure-data-tables, not the blob and queue clients that
    # shared.adapters.azure_clients imports.
    from azure.data.tables import TableServiceClient

    from .manifest import IMPORT_JOBS_TABLE, TableManifestStore

    # The SDK reads UseDevelopmentStorage=true (Azurite) only without a trailing ';'.
    service = TableServiceClient.from_connection_string(storage_connection.strip().rstrip(";"))
    service.create_table_if_not_exists(IMPORT_JOBS_TABLE)
    TableManifestStore(service.get_table_client(IMPORT_JOBS_TABLE)).save(manifest)


if __name__ == "__main__":
    sys.exit(main())
