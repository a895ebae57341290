"""Two checkouts' runs of one benchmark, figure by figure: what ``bench.compare`` prints.

The runs' tables are matched by their first column's heading (and their order among tables of
that heading), rows by their order, figures by column heading; a column only one side printed
is shown as such. Each figure is shown per run, as a mean per side (number by number, when
every run of the side printed it in one shape) and as the ratio of the means, new / old, in
bold when one of its numbers moved by more than 5%.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from bench.markdown_tables import Table, decimals, numbers

MOVED = 0.05  # a ratio further than this from 1 is shown in bold


@dataclass(frozen=True)
class Side:
    name: str  # how the report heads its columns, e.g. "old (082aec7)"
    runs: Sequence[Sequence[Table]]  # each run's tables, in the order printed


def report(old: Side, new: Side) -> str:
    """Markdown: one table per benchmark table and row, a line per figure."""
    sections = []
    for key in _table_keys([*new.runs, *old.runs]):
        old_tables = [t for t in (_find(run, key) for run in old.runs) if t]
        new_tables = [t for t in (_find(run, key) for run in new.runs) if t]
        rows = max(len(t.rows) for t in [*old_tables, *new_tables])
        for row in range(rows):
            sections.append(_section(key, row, rows, old, new, old_tables, new_tables))
    return "\n\n".join(sections)


def _table_keys(runs: Sequence[Sequence[Table]]) -> list[tuple[str, int]]:
    keys: list[tuple[str, int]] = []
    for run in runs:
        for key in _keys(run):
            if key not in keys:
                keys.append(key)
    return keys


def _keys(run: Sequence[Table]) -> list[tuple[str, int]]:
    seen: dict[str, int] = {}
    keys = []
    for table in run:
        seen[table.name] = seen.get(table.name, 0) + 1
        keys.append((table.name, seen[table.name]))
    return keys


def _find(run: Sequence[Table], key: tuple[str, int]) -> Table | None:
    return next((t for t, k in zip(run, _keys(run), strict=True) if k == key), None)


def _section(
    key: tuple[str, int],
    row: int,
    rows: int,
    old: Side,
    new: Side,
    old_tables: list[Table],
    new_tables: list[Table],
) -> str:
    name, ordinal = key
    labels = list(
        dict.fromkeys(t.rows[row][0] for t in [*old_tables, *new_tables] if row < len(t.rows))
    )
    title = f"**{name or '(untitled)'}**" + (f" (table {ordinal})" if ordinal > 1 else "")
    if rows > 1:
        title += f", row {row + 1}"
    title += ": " + " / ".join(labels)
    columns = list(dict.fromkeys(c for t in [*new_tables, *old_tables] for c in t.header[1:]))
    lines = [
        title,
        "",
        f"| figure | {old.name}, each run | {old.name}, mean | {new.name}, each run | "
        f"{new.name}, mean | new / old |",
        "|---|---|---|---|---|---|",
    ]
    for column in columns:
        before = _cells(old_tables, row, column)
        after = _cells(new_tables, row, column)
        lines.append(_figure_line(column, before, after))
    return "\n".join(lines)


def _cells(tables: list[Table], row: int, column: str) -> list[str]:
    return [cell for t in tables if (cell := t.cell(row, column)) is not None]


def _figure_line(column: str, before: list[str], after: list[str]) -> str:
    if not before or not after:
        only = "new only" if after else "old only"
        return (
            f"| {column} ({only}) | {'; '.join(before)} | {mean(before)} | "
            f"{'; '.join(after)} | {mean(after)} | |"
        )
    if len(set(before + after)) == 1:
        return f"| {column} | {before[0]} | | {after[0]} | | same |"
    return (
        f"| {column} | {'; '.join(before)} | {mean(before)} | {'; '.join(after)} | "
        f"{mean(after)} | {ratio(before, after)} |"
    )


def _means(cells: list[str]) -> tuple[list[float], str] | None:
    """The mean of each number of the cells, and their shape; None unless every cell has
    numbers and one shape."""
    parsed = [numbers(cell) for cell in cells]
    shapes = {shape for _, shape in parsed}
    if not cells or len(shapes) != 1 or not parsed[0][0]:
        return None
    return [
        statistics.fmean(values) for values in zip(*(n for n, _ in parsed), strict=True)
    ], shapes.pop()


def mean(cells: list[str]) -> str:
    """The cells' mean, number by number, in their shape and to their precision ("" when
    they have no numbers or differ in shape)."""
    found = _means(cells)
    if found is None:
        return ""
    places = max(decimals(cell) for cell in cells)
    return _fill(found[1], [f"{value:,.{places}f}" for value in found[0]])


def ratio(before: list[str], after: list[str]) -> str:
    """The ratio of the means, new / old, number by number, in the cells' shape (without its
    units); in bold when one moved by more than ``MOVED``; "n/a" when they do not compare."""
    old, new = _means(before), _means(after)
    if old is None or new is None or old[1] != new[1]:
        return "n/a"
    parts, moved = [], False
    for was, now in zip(old[0], new[0], strict=True):
        if was == 0:
            parts.append("same" if now == 0 else "n/a")
            continue
        parts.append(f"{now / was:.2f}")
        moved = moved or abs(now / was - 1) > MOVED
    text = _fill(_units_removed(old[1]), parts)
    return f"**{text}**" if moved else text


def _units_removed(shape: str) -> str:
    """A shape from its first number to its last, without units: ``# of #`` and ``# / #``
    stay, ``#%`` and ``# (host.json as shipped)`` become ``#``."""
    return shape[shape.index("#") : shape.rindex("#") + 1].replace("%", "")


def _fill(shape: str, values: list[str]) -> str:
    text = shape if shape.count("#") == len(values) else "#"
    for value in values:
        text = text.replace("#", value, 1)
    return text
