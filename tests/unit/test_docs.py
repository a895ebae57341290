"""The behaviour tables in docs/ name tests that exist; the console's screenshots that README.md
and docs/console.md show are the ones its browser tests save."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NAMED = re.compile(r"`(tests/[\w/]+\.py)::(test_\w+)`")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+\.png)\)")
SCREENSHOTS = ROOT / "docs" / "images" / "console"
SAVED = re.compile(r"""\bscreenshot\(\s*\w+,\s*["']([\w-]+)["']\s*\)""")


@pytest.mark.parametrize(
    ("doc", "at_least"), [("docs/dead-letters.md", 14), ("docs/console.md", 9)]
)
def test_every_test_a_behaviour_table_names_exists(doc: str, at_least: int) -> None:
    named = NAMED.findall((ROOT / doc).read_text())
    assert len(named) >= at_least
    for path, name in named:
        tree = ast.parse((ROOT / path).read_text())
        functions = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert name in functions, f"{doc} names {path}::{name}, which does not exist"


def _saved_by_the_browser_tests() -> set[str]:
    return {
        f"{name}.png"
        for test in (ROOT / "tests" / "console").glob("test_*.py")
        for name in SAVED.findall(test.read_text())
    }


def test_the_readme_shows_every_screenshot_the_browser_tests_save_and_nothing_else() -> None:
    saved = _saved_by_the_browser_tests()
    assert len(saved) >= 10
    shown = {
        Path(link).name
        for link in IMAGE.findall((ROOT / "README.md").read_text())
        if link.startswith("docs/images/console/")
    }
    assert shown == saved
    assert {p.name for p in SCREENSHOTS.glob("*.png")} == saved  # `make screenshots` wrote them


@pytest.mark.parametrize("doc", ["README.md", "docs/console.md"])
def test_every_image_a_doc_shows_is_committed(doc: str) -> None:
    path = ROOT / doc
    links = IMAGE.findall(path.read_text())
    assert links
    assert [link for link in links if not (path.parent / link).is_file()] == []
