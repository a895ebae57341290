"""Sample catalogues written by the tests, in the four formats the job reads."""

from __future__ import annotations

import json
from pathlib import Path

from spark_jobs.product_import.columns import FIELDS as HEADER


def product(i: int) -> dict[str, str]:
    return {
        "sku": f"SKU-{i:06d}",
        "name": f"Product {i}",
        "price": f"{1 + i % 500}.{i % 100:02d}",
        "currency": "EUR",
        "description": f"row {i}",
    }


def write_csv(path: Path, rows: int, *, broken_lines: dict[int, str] | None = None) -> Path:
    """``broken_lines`` maps a 1-based data row position to a raw line put there instead."""
    broken = broken_lines or {}
    lines = [",".join(HEADER)]
    for i in range(1, rows + 1):
        if i in broken:
            lines.append(broken[i])
        else:
            p = product(i)
            lines.append(",".join(p[name] for name in HEADER))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_jsonl(path: Path, rows: int, *, broken_lines: dict[int, str] | None = None) -> Path:
    broken = broken_lines or {}
    lines = [broken.get(i) or json.dumps(product(i)) for i in range(1, rows + 1)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_xlsx(path: Path, rows: int, *, empty_rows: set[int] = frozenset()) -> Path:  # type: ignore[assignment]
    from openpyxl import Workbook

    workbook = Workbook(write_only=True)
    sheet = workbook.create_sheet("products")
    sheet.append(list(HEADER))
    for i in range(1, rows + 1):
        if i in empty_rows:
            sheet.append([None] * len(HEADER))
        else:
            p = product(i)
            sheet.append([p["sku"], p["name"], float(p["price"]), p["currency"], p["description"]])
    workbook.save(path)
    return path


def write_parquet(spark: object, path: Path, rows: int) -> Path:
    df = spark.createDataFrame([product(i) for i in range(1, rows + 1)])  # type: ignore[attr-defined]
    df.coalesce(1).write.mode("overwrite").parquet(str(path))
    return path
