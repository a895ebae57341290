"""docs/architecture.md stays true: every file and folder it names exists, and the layers it
lists are the ones pyproject.toml's app-layers contract checks (make lint), in that order."""

from __future__ import annotations

import re
import tomllib

from .conftest import ROOT

DOC = ROOT / "docs" / "architecture.md"


def test_every_path_the_page_names_exists() -> None:
    folders = "shared|spark_jobs|localdev|packages|infra|docs|tests"
    named = set(re.findall(rf"`((?:{folders})/[^`\s]*)`", DOC.read_text()))
    named |= {"function_app.py"}

    assert len(named) > 30
    assert sorted(p for p in named if not (ROOT / p).exists()) == []


def test_the_layers_are_the_contracts() -> None:
    text = DOC.read_text()
    listed = text[text.index("<!-- layers:") : text.index("<!-- /layers -->")]
    documented = re.findall(r"^\d+\. `([\w.]+)`", listed, flags=re.MULTILINE)
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in contracts["contracts"] if c["id"] == "app-layers"]

    assert documented == layers
