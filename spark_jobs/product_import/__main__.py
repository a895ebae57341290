"""python -m spark_jobs.product_import --input FILE --format csv --job-id ID --sessions N
--queue NAME --connection-setting ServiceBusConnection [--storage-setting AzureWebJobsStorage]
[--rejects-path DIR]

The executors run the driver's Python (``sys.executable``) unless ``PYSPARK_PYTHON`` names
another, so a virtual environment's packages reach them without further setup.

The settings name connections as Functions bindings do, read from the environment, never
passed on the command line: ``NAME`` holds a connection string, or
``NAME__fullyQualifiedNamespace`` (Service Bus) / ``NAME__accountName`` (storage) select an
identity-based connection (``shared.config.service_bus_connection`` /
``storage_connection``, as the function app reads its own). Prints the manifest as JSON.

Telemetry is set up as the function app's, from ``OTEL_EXPORTER_OTLP_ENDPOINT`` /
``APPLICATIONINSIGHTS_CONNECTION_STRING``: the job is one trace (see ``tracing``), continuing
the caller's when ``TRACEPARENT`` holds a W3C traceparent.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import MutableMapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shared.config import StorageConnectionSettings

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
    # The job's own lines (counts, progress); the SDKs' request logs only when they warn.
    for noisy in ("azure", "py4j"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from shared.config import service_bus_connection, storage_connection

    # Both fail at once, naming the settings, before Spark starts.
    service_bus = service_bus_connection(args.connection_setting)
    storage = storage_connection(args.storage_setting) if args.storage_setting else None

    executors_run_this_python(os.environ)
    from pyspark.sql import SparkSession

    from shared.telemetry.setup import telemetry

    from .job import run_import
    from .tracing import TRACEPARENT

    builder = SparkSession.builder.appName(f"product-import-{args.job_id}")
    if args.master:
        builder = builder.master(args.master)
    spark = builder.getOrCreate()
    try:
        manifest = run_import(
            spark,
            input_path=args.input,
            fmt=args.format,
            job_id=args.job_id,
            queue_name=args.queue,
            service_bus=service_bus,
            sessions=args.sessions,
            rejects_path=args.rejects_path,
            traceparent=os.environ.get(TRACEPARENT),
        )
        if storage:
            save_manifest(storage, manifest)
        print(manifest.to_json(), flush=True)
    finally:
        # The job's span and log lines, also when it failed, before the process ends; after
        # the manifest is out, since a flush waits for as long as the endpoint does not answer.
        telemetry().flush()
    return 0


def executors_run_this_python(environ: MutableMapping[str, str]) -> None:
    """Spark starts its Python workers with ``PYSPARK_PYTHON``, else ``python3`` from PATH,
    which lacks the job's packages when the driver runs from a virtual environment: default
    it to the driver's interpreter. A value already set (by the user, spark-submit's
    ``spark.pyspark.python`` or the cluster) is kept."""
    environ.setdefault("PYSPARK_PYTHON", sys.executable)


def save_manifest(storage: StorageConnectionSettings, manifest: JobManifest) -> None:
    """Save the manifest to the importjobs table, with the app's table client (a connection
    string, UseDevelopmentStorage=true included, or the storage account with a credential)."""
    from .clients import IMPORT_JOBS_TABLE, TableManifestStore, table_service

    service = table_service(storage)
    service.create_table_if_not_exists(IMPORT_JOBS_TABLE)
    TableManifestStore(service.get_table_client(IMPORT_JOBS_TABLE)).save(manifest)


if __name__ == "__main__":
    sys.exit(main())
