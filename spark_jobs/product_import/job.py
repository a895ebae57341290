"""The product import job: catalogue rows -> ordered sessions on the import queue.

Each step is a small function that takes a SparkSession or DataFrame and returns a DataFrame,
so tests run them one by one on local Spark. Rows are never collected on the driver: files are
read, numbered and sent by the executors; only counts come back.

Contract of what lands on the queue:

- a row's message id is ``f"{job_id}:{row_number}"`` (its 1-based position among the data rows
  of the input), so a retried Spark task or a re-run of the same job is caught by the queue's
  duplicate detection;
- session ``f"{job_id}-{k:04d}"`` holds a contiguous run of valid rows in row-number order;
  ``step`` is the position within the session (1-based) and the last one has ``is_last``;
- the body is the app's TaskMessage (pipeline ``product_import``, task ``ImportProduct``,
  ``job_id`` = the import job), so the app records progress under the job id.
"""

from __future__ import annotations

import io
import logging
import math
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from shared.config import ServiceBusConnectionSettings

from .columns import FIELDS
from .manifest import JobManifest
from .progress import SendProgress
from .sending import SendOptions, send_partition
from .tracing import job_span

log = logging.getLogger("spark_jobs.product_import")

FORMATS = ("csv", "json", "parquet", "xlsx")
CORRUPT = "_corrupt_record"
ERROR = "_parse_error"
ROWS_PER_SESSION = 1000
MAX_DEFAULT_SESSIONS = 512
TASKS_PER_CORE = 8

_TEXT_SCHEMA = T.StructType([T.StructField(name, T.StringType()) for name in FIELDS])
_READ_SCHEMA = T.StructType([*_TEXT_SCHEMA.fields, T.StructField(CORRUPT, T.StringType())])
PARSED_SCHEMA = T.StructType([*_READ_SCHEMA.fields, T.StructField(ERROR, T.StringType())])


class CatalogueSchemaError(ValueError):
    """The input as a whole does not have the catalogue's columns: nothing is sent."""


def read_catalogue(spark: SparkSession, path: str, fmt: str) -> DataFrame:
    """The rows of the file(s) at ``path`` as text columns ``sku, name, price, currency,
    description`` plus ``_corrupt_record`` (the raw text of a row the reader could not parse)
    and ``_parse_error`` (why). Raises ``CatalogueSchemaError`` when the columns are missing."""
    if fmt == "csv":
        df = (
            spark.read.schema(_READ_SCHEMA)
            .option("header", True)
            .option("mode", "PERMISSIVE")
            .option("columnNameOfCorruptRecord", CORRUPT)
            .csv(path)
        )
        return _with_error(
            df, "cannot be parsed as a CSV line with the columns " + ",".join(FIELDS)
        )
    if fmt == "json":
        df = (
            spark.read.schema(_READ_SCHEMA)
            .option("mode", "PERMISSIVE")
            .option("columnNameOfCorruptRecord", CORRUPT)
            .json(path)
        )
        return _with_error(df, "is not a JSON object")
    if fmt == "parquet":
        df = spark.read.parquet(path)
        missing = [name for name in FIELDS if name not in df.columns]
        if missing:
            raise CatalogueSchemaError(f"{path} has no column(s) {', '.join(missing)}")
        return df.select(
            *[F.col(name).cast("string").alias(name) for name in FIELDS],
            F.lit(None).cast("string").alias(CORRUPT),
            F.lit(None).cast("string").alias(ERROR),
        )
    if fmt == "xlsx":
        # Each workbook is parsed by openpyxl inside an executor task, never on the driver.
        rdd = spark.sparkContext.binaryFiles(path).flatMap(lambda item: _xlsx_rows(item[1]))
        return spark.createDataFrame(rdd, PARSED_SCHEMA)
    raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")


def _with_error(df: DataFrame, reason: str) -> DataFrame:
    return df.withColumn(
        ERROR, F.when(F.col(CORRUPT).isNotNull(), F.lit(reason)).otherwise(F.lit(None))
    )


def _xlsx_rows(content: bytes) -> Iterator[tuple[str | None, ...]]:
    from openpyxl import load_workbook  # on the executors only

    workbook = load_workbook(io.BytesIO(content), read_only=True, data_only=True)
    try:
        rows = workbook.worksheets[0].iter_rows(values_only=True)
        header = [str(cell).strip().lower() if cell is not None else "" for cell in next(rows, ())]
        missing = [name for name in FIELDS if name not in header]
        if missing:
            raise CatalogueSchemaError(f"the first sheet has no column(s) {', '.join(missing)}")
        index = {name: header.index(name) for name in FIELDS}
        for cells in rows:
            values = ["" if cell is None else _cell_text(cell) for cell in cells]
            if not any(value.strip() for value in values):
                yield (*([None] * len(FIELDS)), "", "is an empty row")
                continue
            if len(values) > len(header) and any(v.strip() for v in values[len(header) :]):
                yield (*([None] * len(FIELDS)), "\t".join(values), "has cells beyond the header")
                continue
            yield (
                *[values[index[name]] if index[name] < len(values) else None for name in FIELDS],
                None,
                None,
            )
    finally:
        workbook.close()


def _cell_text(cell: object) -> str:
    if isinstance(cell, float) and cell.is_integer():
        return str(int(cell))
    return str(cell)


def number_rows(df: DataFrame) -> DataFrame:
    """Add ``row_number``: the 1-based position of each row in the input, stable across runs
    of the same input (file order, computed per partition without moving rows); and
    ``_valid_offset``, the number of valid rows in the input partitions before the row's,
    from which ``assign_sessions`` ranks the valid rows without another pass."""
    return _number(df).frame


def _valid() -> Column:
    """The rows ``validate`` keeps: those the reader could parse."""
    return F.col(ERROR).isNull()


@dataclass(frozen=True)
class _Numbered:
    frame: DataFrame  # the input with row_number and _valid_offset
    rows: int
    valid: int
    cached: DataFrame  # persisted for the numbering: unpersist when done with ``frame``


_POSITION_BITS = 33  # monotonically_increasing_id is (partition << 33) + position


def _number(df: DataFrame) -> _Numbered:
    """One pass counts the rows and the valid rows of each input partition; a row's number
    is then the rows before its partition plus its position in it, in the JVM (no Python
    round trip per row); only two counts per partition reach the driver."""
    # Persisted: the ids are computed once, and later queries read the cache, not a raw
    # CSV/JSON scan (Spark refuses one that only needs the corrupt-record column).
    with_id = (
        df.withColumn("_mid", F.monotonically_increasing_id())
        .withColumn("_part", F.shiftright(F.col("_mid"), _POSITION_BITS))
        .persist()
    )
    counts = with_id.groupBy("_part").agg(
        F.count(F.lit(1)).alias("rows"), F.count(F.when(_valid(), 1)).alias("valid")
    )
    by_part = {row["_part"]: (row["rows"], row["valid"]) for row in counts.collect()}
    offsets: list[int] = []
    valid_offsets: list[int] = []
    rows = valid = 0
    for index in range(max(by_part, default=-1) + 1):  # a partition with no rows has no count
        offsets.append(rows)
        valid_offsets.append(valid)
        part_rows, part_valid = by_part.get(index, (0, 0))
        rows, valid = rows + part_rows, valid + part_valid

    def offset_of_part(values: list[int]) -> Column:
        table = F.array(*[F.lit(v) for v in values or [0]]).cast("array<long>")
        return F.element_at(table, (F.col("_part") + 1).cast("int"))

    frame = (
        with_id.withColumn("row_number", offset_of_part(offsets) + _position(F.col("_mid")) + 1)
        .withColumn("_valid_offset", offset_of_part(valid_offsets))
        .drop("_mid", "_part")
    )
    return _Numbered(frame, rows, valid, with_id)


def _position(mid: Column) -> Column:
    return mid.bitwiseAND(F.lit((1 << _POSITION_BITS) - 1))


def validate(df: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Split numbered rows into (valid, rejects). Only rows that cannot be parsed at all are
    rejected, with ``reason`` and the ``raw`` text; business rules (a missing price...) are the
    function app's to check and dead-letter, row by row."""
    valid = df.filter(_valid()).select(*FIELDS, "row_number", "_valid_offset")
    rejects = df.filter(~_valid()).select(
        "row_number", F.col(ERROR).alias("reason"), F.col(CORRUPT).alias("raw")
    )
    return valid, rejects


def default_sessions(rows: int) -> int:
    return max(1, min(MAX_DEFAULT_SESSIONS, math.ceil(rows / ROWS_PER_SESSION)))


def assign_sessions(df: DataFrame, job_id: str, sessions: int, *, total: int) -> DataFrame:
    """Add ``session_id``, ``step`` and ``is_last``: ``total`` valid rows cut into ``sessions``
    contiguous runs (sizes differ by at most one) in row-number order.

    ``df`` is ``validate``'s valid rows, not moved since (no shuffle in between): a row's rank
    among the valid rows is the valid rows before its input partition (``_valid_offset``) plus
    its position among the valid rows of its partition, which monotonically_increasing_id
    counts when evaluated after the filter, in the same partitions."""
    n = _session_count(sessions, total)
    ranked = df.withColumn(
        "_rank", F.col("_valid_offset") + _position(F.monotonically_increasing_id())
    )
    rank = F.col("_rank")
    k = F.floor(rank * n / total) if total else F.lit(0)
    start = F.floor((k * total + n - 1) / n)
    next_start = F.floor(((k + 1) * total + n - 1) / n)
    return (
        ranked.withColumn("_k", k.cast("long"))
        .withColumn("session_id", F.format_string(f"{job_id}-%04d", F.col("_k")))
        .withColumn("step", (rank - start + 1).cast("int"))
        .withColumn("is_last", rank == next_start - 1)
        .drop("_rank", "_k", "_valid_offset")
    )


def _session_count(sessions: int, total: int) -> int:
    return max(1, min(sessions, total)) if total else 1


def session_sizes(job_id: str, sessions: int, total: int) -> dict[str, int]:
    """How many rows ``assign_sessions`` puts in each session (the same arithmetic, without
    a Spark job): session k holds ranks ceil(k * total / n) up to ceil((k + 1) * total / n)."""
    n = _session_count(sessions, total)
    bounds = [-(-k * total // n) for k in range(n + 1)]
    return {
        f"{job_id}-{k:04d}": bounds[k + 1] - bounds[k]
        for k in range(n)
        if bounds[k + 1] > bounds[k]
    }


def partition_for_sending(planned: DataFrame, tasks: int) -> DataFrame:
    """``planned`` in ``tasks`` partitions, each holding whole sessions sorted by (session_id,
    step). Range partitioning keeps a session in one partition and gives the partitions about
    the same number of sessions (hash partitioning leaves some with twice the average, which
    one core then sends alone at the end)."""
    return planned.repartitionByRange(tasks, "session_id").sortWithinPartitions(
        "session_id", "step"
    )


def send_partitions(sessions: int, cores: int) -> int:
    """How many send tasks: several per core, so a core that finishes early takes the next
    task instead of idling while the last large one runs, and the progress count moves as
    tasks finish; never more than the sessions, which are never split."""
    return max(1, min(sessions, TASKS_PER_CORE * cores))


def run_import(
    spark: SparkSession,
    *,
    input_path: str,
    fmt: str,
    job_id: str,
    queue_name: str,
    service_bus: ServiceBusConnectionSettings,
    sessions: int | None = None,
    rejects_path: str | None = None,
    options: SendOptions | None = None,
    progress_every: float = 5.0,
    traceparent: str | None = None,
) -> JobManifest:
    """Read, check, number, split and send one catalogue to ``queue_name`` through the
    ``service_bus`` connection, logging the rows sent every ``progress_every`` seconds.
    Returns the manifest: rows read, rejected and sent; sessions and their message counts.
    The rejects are written to ``rejects_path`` when given.

    With telemetry, the job is one span (``tracing.job_span``, a child of ``traceparent``
    when given) and every message it sends is in its trace, whose id the manifest keeps."""
    with job_span(job_id, traceparent=traceparent) as job_trace, ExitStack() as cached:
        numbered = _number(read_catalogue(spark, input_path, fmt))
        cached.callback(numbered.cached.unpersist)
        valid, rejects = validate(numbered.frame)
        rows_read, total = numbered.rows, numbered.valid
        n = sessions or default_sessions(total)
        log.info(
            "job %s: %d rows read, %d rejected, %d to send in %d sessions",
            job_id,
            rows_read,
            rows_read - total,
            total,
            n,
        )
        job_trace.note(**{"import.rows_read": rows_read, "import.rows_rejected": rows_read - total})
        if rejects_path:
            rejects.write.mode("overwrite").json(rejects_path)
        session_counts = session_sizes(job_id, n, total)
        sent = spark.sparkContext.accumulator(0)
        send = send_partition(
            job_id=job_id,
            queue_name=queue_name,
            connection=service_bus,
            options=options or SendOptions(),
            sent=sent,
            trace=job_trace.properties,
        )
        tasks = send_partitions(len(session_counts), spark.sparkContext.defaultParallelism)
        if total:
            planned = assign_sessions(valid, job_id, n, total=total)
            with SendProgress(job_id, total, lambda: int(sent.value), every=progress_every):
                partition_for_sending(planned, tasks).foreachPartition(send)
        log.info("job %s: %d messages handed to %s", job_id, sent.value, queue_name)
        job_trace.note(**{"import.rows_sent": sent.value, "import.sessions": len(session_counts)})
    return JobManifest(
        job_id=job_id,
        queue_name=queue_name,
        rows_read=rows_read,
        rows_rejected=rows_read - total,
        rows_sent=sent.value,
        sessions=session_counts,
        source=input_path,
        trace_id=job_trace.trace_id,
    )
