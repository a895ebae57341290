"""The behaviour tables in docs/ name tests that exist."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NAMED = re.compile(r"`(tests/[\w/]+\.py)::(test_\w+)`")


@pytest.mark.parametrize("doc", ["docs/dead-letters.md"])
def test_every_test_a_behaviour_table_names_exists(doc: str) -> None:
    named = NAMED.findall((ROOT / doc).read_text())
    assert len(named) >= 14
    for path, name in named:
        tree = ast.parse((ROOT / path).read_text())
        functions = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert name in functions, f"{doc} names {path}::{name}, which does not exist"
