"""The Markdown tables a benchmark prints, read back: each table's header and rows, and each
cell's numbers (``bench.compare`` sets two checkouts' figures side by side with them).

A cell's figures are its numbers in order, with the text around them as its shape: ``"21.54 /
31.19"`` is ``[21.54, 31.19]`` shaped ``"# / #"``, ``"**8.35**"`` is ``[8.35]`` shaped ``"#"``,
``"82%"`` is ``[82]`` shaped ``"#%"``, ``"5,000 of 5,000"`` is ``[5000, 5000]`` shaped ``"# of #"``.
Two cells compare number by number when their shapes agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Thousands separated by commas ("5,000") before plain numbers, so "22.32, 1.14" stays two.
_NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
_SEPARATOR = re.compile(r"^\|(?:\s*:?-+:?\s*\|)+$")


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    @property
    def name(self) -> str:
        """What a table is known by: its first column's heading."""
        return self.header[0] if self.header else ""

    def cell(self, row: int, column: str) -> str | None:
        """The cell of ``row`` (from 0) under the heading ``column``; None when the table
        has no such row or column."""
        if column not in self.header or row >= len(self.rows):
            return None
        cells = self.rows[row]
        index = self.header.index(column)
        return cells[index] if index < len(cells) else ""


def tables(text: str) -> list[Table]:
    """Every table in ``text``: a header line, a separator line (``|---|``), and the lines
    starting with ``|`` after it."""
    found: list[Table] = []
    lines = [line.strip() for line in text.splitlines()]
    index = 0
    while index < len(lines) - 1:
        if lines[index].startswith("|") and _SEPARATOR.match(lines[index + 1]):
            header = _cells(lines[index])
            index += 2
            rows = []
            while index < len(lines) and lines[index].startswith("|"):
                rows.append(_cells(lines[index]))
                index += 1
            found.append(Table(header, tuple(rows)))
        else:
            index += 1
    return found


def _cells(line: str) -> tuple[str, ...]:
    return tuple(cell.strip() for cell in line.strip().strip("|").split("|"))


def numbers(cell: str) -> tuple[list[float], str]:
    """The numbers of ``cell`` in order, and its shape (the cell with ``#`` for each number,
    without Markdown's bold)."""
    plain = cell.replace("**", "").strip()
    found = [float(match.group().replace(",", "")) for match in _NUMBER.finditer(plain)]
    return found, _NUMBER.sub("#", plain)


def decimals(cell: str) -> int:
    """The most digits after the point of any number in ``cell``."""
    return max((len(m.group().partition(".")[2]) for m in _NUMBER.finditer(cell)), default=0)
