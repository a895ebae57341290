"""The committed htmx is the one package-lock.json pins (make setup copies it from
node_modules/htmx.org), so the app ships exactly what npm installed."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_htmx_is_the_pinned_npm_package() -> None:
    lock = json.loads((ROOT / "package-lock.json").read_text())
    pinned = lock["packages"]["node_modules/htmx.org"]["version"]
    installed = ROOT / "node_modules" / "htmx.org"
    assert json.loads((installed / "package.json").read_text())["version"] == pinned
    committed = (
        ROOT / "shared" / "entrypoints" / "console" / "static" / "htmx.min.js"
    ).read_bytes()
    assert committed == (installed / "dist" / "htmx.min.js").read_bytes()
