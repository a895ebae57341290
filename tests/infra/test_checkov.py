"""checkov on infra/ with zero failed checks: every skip is justified inline in the bicep.

checkov pins packaging<24, so it lives in its own venv (.venv-checkov), which `make setup`
creates; a test never installs anything.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from .conftest import INFRA, ROOT

CHECKOV_VENV = ROOT / ".venv-checkov"
# Files checkov cannot read, each with why nothing goes unchecked: checkov's Bicep parser
# (pycep-parser 0.5, which checkov pins) predates Bicep extensions (`extension
# microsoftGraphV1`), and this file declares only Microsoft.Graph resources, for which checkov
# has no check; tests/infra/test_bicep.py parses it with a current pycep-parser, and
# tests/infra/test_console_auth.py checks what it declares.
NOT_FOR_CHECKOV = ("app/console-app.bicep",)

pytestmark = [pytest.mark.infra, pytest.mark.timeout(600)]


def _checkov() -> str:
    exe = CHECKOV_VENV / "bin" / "checkov"
    if not (exe.exists() and (CHECKOV_VENV / ".installed").exists()):
        pytest.fail(f"checkov is not installed in {CHECKOV_VENV}: run `make setup`", pytrace=False)
    return str(exe)


@pytest.fixture(scope="module")
def report() -> dict:
    result = subprocess.run(
        [
            _checkov(),
            "-d",
            str(INFRA),
            "--framework",
            "bicep",
            "--skip-download",
            "--compact",
            *(arg for path in NOT_FOR_CHECKOV for arg in ("--skip-path", path)),
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert result.stdout.strip(), result.stderr
    data = json.loads(result.stdout)
    reports = data if isinstance(data, list) else [data]
    (bicep,) = [r for r in reports if r.get("check_type") == "bicep"]
    return bicep


def test_no_failed_checks(report: dict) -> None:
    failed = [
        f"{c['check_id']} {c['resource']} ({c['file_path']}): {c['check_name']}"
        for c in report["results"]["failed_checks"]
    ]
    assert failed == []


def test_every_file_was_parsed(report: dict) -> None:
    # An unparsed file is an unchecked file.
    assert report["summary"]["parsing_errors"] == 0
    assert report["results"]["parsing_errors"] == []


def test_every_skip_is_justified_inline() -> None:
    for path in INFRA.rglob("*.bicep"):
        for line in path.read_text().splitlines():
            if "checkov:skip" in line:
                assert re.search(r"checkov:skip=CKV2?_AZURE_\d+: \S.{20,}", line), (path, line)


def test_every_inline_skip_is_still_needed(report: dict) -> None:
    skipped = {c["check_id"] for c in report["results"]["skipped_checks"]}
    declared = {
        m
        for path in INFRA.rglob("*.bicep")
        for m in re.findall(r"checkov:skip=(CKV2?_AZURE_\d+)", path.read_text())
    }
    assert declared == skipped, f"stale skips: {sorted(declared - skipped)}"
