"""Reading, numbering, rejects and session assignment on local Spark, without sending."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from spark_jobs.product_import.job import (
    CatalogueSchemaError,
    assign_sessions,
    default_sessions,
    number_rows,
    partition_for_sending,
    read_catalogue,
    send_partitions,
    session_sizes,
    validate,
)

from .catalogues import product, write_csv, write_jsonl, write_parquet, write_xlsx


def plan(spark, path: Path, fmt: str, job_id: str, sessions: int):
    numbered = number_rows(read_catalogue(spark, str(path), fmt))
    valid, rejects = validate(numbered)
    total = valid.count()
    planned = assign_sessions(valid, job_id, sessions, total=total)
    return [r.asDict() for r in planned.orderBy("row_number").collect()], [
        r.asDict() for r in rejects.orderBy("row_number").collect()
    ]


def assert_sessions_contiguous(rows: list[dict], sessions: int) -> None:
    by_session: dict[str, list[dict]] = {}
    for row in rows:
        by_session.setdefault(row["session_id"], []).append(row)
    assert len(by_session) == sessions
    previous_last = 0
    for session_id in sorted(by_session):
        members = by_session[session_id]
        assert [m["step"] for m in members] == list(range(1, len(members) + 1))
        assert [m["is_last"] for m in members] == [False] * (len(members) - 1) + [True]
        numbers = [m["row_number"] for m in members]
        assert numbers == sorted(numbers) and numbers[0] > previous_last
        previous_last = numbers[-1]
    sizes = [len(v) for v in by_session.values()]
    assert max(sizes) - min(sizes) <= 1


def test_csv_rows_are_numbered_in_file_order_and_split_into_contiguous_sessions(spark, tmp_path):
    path = write_csv(tmp_path / "c.csv", 103)

    rows, rejects = plan(spark, path, "csv", "job-a", 4)

    assert rejects == []
    assert [r["row_number"] for r in rows] == list(range(1, 104))
    assert [r["sku"] for r in rows] == [product(i)["sku"] for i in range(1, 104)]
    assert {r["session_id"] for r in rows} == {f"job-a-{k:04d}" for k in range(4)}
    assert_sessions_contiguous(rows, 4)


def test_csv_lines_with_the_wrong_number_of_fields_are_rejected_with_a_reason(spark, tmp_path):
    path = write_csv(
        tmp_path / "c.csv", 20, broken_lines={3: "SKU-X,only two", 7: "a,b,1,EUR,d,extra"}
    )

    rows, rejects = plan(spark, path, "csv", "job-b", 3)

    assert [r["row_number"] for r in rejects] == [3, 7]
    assert all("cannot be parsed as a CSV line" in r["reason"] for r in rejects)
    assert rejects[0]["raw"] == "SKU-X,only two"
    assert [r["row_number"] for r in rows] == [i for i in range(1, 21) if i not in (3, 7)]
    assert_sessions_contiguous(rows, 3)


def test_rows_that_parse_but_break_business_rules_are_not_rejected_by_spark(spark, tmp_path):
    path = write_csv(tmp_path / "c.csv", 5, broken_lines={2: "SKU-2,No price,,EUR,x"})

    rows, rejects = plan(spark, path, "csv", "job-c", 1)

    assert rejects == []
    assert rows[1]["price"] is None  # sent; the app dead-letters it naming "price"


def test_json_lines_that_are_not_json_are_rejected(spark, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", 10, broken_lines={5: "{not json"})

    rows, rejects = plan(spark, path, "json", "job-d", 2)

    assert [(r["row_number"], r["reason"], r["raw"]) for r in rejects] == [
        (5, "is not a JSON object", "{not json")
    ]
    assert len(rows) == 9
    assert_sessions_contiguous(rows, 2)


def test_xlsx_is_read_on_the_executors_and_empty_rows_are_rejected(spark, tmp_path):
    path = write_xlsx(tmp_path / "c.xlsx", 12, empty_rows={4})

    rows, rejects = plan(spark, path, "xlsx", "job-e", 2)

    assert [(r["row_number"], r["reason"]) for r in rejects] == [(4, "is an empty row")]
    assert (rows[0]["sku"], rows[0]["price"]) == ("SKU-000001", "2.01")
    assert len(rows) == 11
    assert_sessions_contiguous(rows, 2)


def test_parquet_is_read_and_a_missing_column_fails_the_job(spark, tmp_path):
    path = write_parquet(spark, tmp_path / "c.parquet", 30)

    rows, rejects = plan(spark, path, "parquet", "job-f", 5)

    assert rejects == [] and len(rows) == 30
    assert_sessions_contiguous(rows, 5)
    spark.createDataFrame([{"sku": "a"}]).write.parquet(str(tmp_path / "bad.parquet"))
    with pytest.raises(CatalogueSchemaError, match="price"):
        read_catalogue(spark, str(tmp_path / "bad.parquet"), "parquet")


def test_numbering_is_stable_across_runs(spark, tmp_path):
    path = write_csv(tmp_path / "c.csv", 50)

    first, _ = plan(spark, path, "csv", "job-g", 3)
    second, _ = plan(spark, path, "csv", "job-g", 3)

    assert first == second


def test_the_default_session_count_follows_the_row_count():
    assert default_sessions(0) == 1
    assert default_sessions(1500) == 2


@pytest.mark.parametrize(("rows", "sessions"), [(103, 4), (20, 3), (5, 8), (1, 1)])
def test_the_manifest_session_sizes_are_those_of_the_plan(spark, tmp_path, rows, sessions):
    path = write_csv(tmp_path / "c.csv", rows)

    planned, _ = plan(spark, path, "csv", "job-h", sessions)

    assert session_sizes("job-h", sessions, rows) == Counter(r["session_id"] for r in planned)


def test_an_empty_catalogue_has_no_sessions():
    assert session_sizes("job-i", 3, 0) == {}


def test_each_send_task_gets_whole_sessions_in_step_order(spark, tmp_path):
    path = write_csv(tmp_path / "c.csv", 90)
    valid, _ = validate(number_rows(read_catalogue(spark, str(path), "csv")))
    planned = assign_sessions(valid, "job-j", 9, total=90)

    tasks = partition_for_sending(planned, 4).rdd.glom().collect()

    assert len(tasks) == 4
    seen: set[str] = set()
    for rows in tasks:
        keys = [(r["session_id"], r["step"]) for r in rows]
        assert keys == sorted(keys)
        sessions = {session_id for session_id, _ in keys}
        assert not sessions & seen  # no session is split between two tasks
        seen |= sessions
    assert len(seen) == 9


def test_there_are_several_send_tasks_per_core_but_never_more_than_sessions():
    assert send_partitions(100, 2) == 16
    assert send_partitions(3, 2) == 3
    assert send_partitions(0, 2) == 1


@pytest.fixture
def small_splits(spark):
    """Files cut into splits of about 1 kB, so a small catalogue spans many partitions."""
    keys = ("spark.sql.files.maxPartitionBytes", "spark.sql.files.openCostInBytes")
    saved = {key: spark.conf.get(key) for key in keys}
    for key in keys:
        spark.conf.set(key, "1024")
    yield
    for key, value in saved.items():
        spark.conf.set(key, value)


def test_rows_and_ranks_are_counted_across_input_partitions(spark, tmp_path, small_splits):
    broken = {5: "only,three,fields", 77: "x", 78: "y", 150: "a,b,1,EUR,d,extra"}
    path = write_csv(tmp_path / "c.csv", 200, broken_lines=broken)
    assert read_catalogue(spark, str(path), "csv").rdd.getNumPartitions() > 3

    rows, rejects = plan(spark, path, "csv", "job-k", 7)

    assert [r["row_number"] for r in rejects] == sorted(broken)
    assert [r["row_number"] for r in rows] == [i for i in range(1, 201) if i not in broken]
    assert [r["sku"] for r in rows] == [product(i)["sku"] for i in range(1, 201) if i not in broken]
    assert_sessions_contiguous(rows, 7)
