"""Every .bicep file parses (pycep-parser), and the main template has the azd shape."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pycep
import pytest

from .conftest import INFRA

BICEP_FILES = sorted(INFRA.rglob("*.bicep"))


def test_there_are_bicep_files() -> None:
    assert INFRA / "main.bicep" in BICEP_FILES


@pytest.mark.infra
@pytest.mark.parametrize("path", BICEP_FILES, ids=lambda p: str(p.relative_to(INFRA)))
def test_bicep_parses(path: Path) -> None:
    tree = pycep.BicepParser().parse(text=path.read_text())
    assert tree


def test_main_is_subscription_scoped_and_not_compiled() -> None:
    main = (INFRA / "main.bicep").read_text()
    assert re.search(r"^targetScope = 'subscription'", main, re.MULTILINE)
    assert not (INFRA / "main.json").exists(), "do not commit the compiled template"


def test_every_module_reference_exists() -> None:
    for path in BICEP_FILES:
        for ref in re.findall(r"^module \w+ '([^']+)'", path.read_text(), re.MULTILINE):
            assert (path.parent / ref).is_file(), f"{path.name} references missing {ref}"


def test_no_keys_or_connection_strings_in_infra() -> None:
    for path in BICEP_FILES:
        text = path.read_text()
        assert "listKeys(" not in text, path
        assert "AccountKey=" not in text, path
        assert "SharedAccessKey" not in text, path


def test_role_definitions_are_the_documented_built_ins() -> None:
    expected = {
        "4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0": "Azure Service Bus Data Receiver",
        "69a216fc-b8fb-44d8-bc22-1f3c2cd27a39": "Azure Service Bus Data Sender",
        "090c5cfd-751d-490a-894a-3ce6f1109419": "Azure Service Bus Data Owner",
        "b7e6dc6d-f1e8-4753-8033-0f276bb0955b": "Storage Blob Data Owner",
        "974c5e8b-45b9-4653-ba55-5f855dd0fb88": "Storage Queue Data Contributor",
        "0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3": "Storage Table Data Contributor",
        "4633458b-17de-408a-b874-0445c86b69e6": "Key Vault Secrets User",
        "b86a8fe4-44ce-4948-aee5-eccb2c155cd7": "Key Vault Secrets Officer",
        "3913510d-42f4-4e42-8a64-420c390055eb": "Monitoring Metrics Publisher",
        "09976791-48a7-449e-bb21-39d1a415f350": "Communication and Email Service Owner",
    }
    found: dict[str, str] = {}
    for path in (INFRA / "app" / "rbac").glob("*.bicep"):
        for guid, comment in re.findall(r"'([0-9a-f-]{36})' // (.+)$", path.read_text(), re.M):
            found[guid] = comment.strip()
    assert found == expected


def _code_constants(suffix: str) -> set[str]:
    """The values of module-level ``*_TABLE`` / ``*_CONTAINER`` constants anywhere in shared/."""
    found: set[str] = set()
    for path in (INFRA.parent / "shared").rglob("*.py"):
        found |= set(re.findall(rf'^\w+{suffix} = "([^"]+)"', path.read_text(), re.MULTILINE))
    return found


def _main_list(param: str) -> set[str]:
    main = (INFRA / "main.bicep").read_text()
    match = re.search(rf"^\s+{param}: \[([^\]]*)\]", main, re.MULTILINE)
    assert match, param
    return set(re.findall(r"'([^']+)'", match.group(1)))


def test_infra_creates_every_table_and_container_the_code_uses() -> None:
    # main.bicep creates the tables infra/app-resources.json lists (localdev.derived)
    assert "tables: appResources.tables" in (INFRA / "main.bicep").read_text()
    tables = json.loads((INFRA / "app-resources.json").read_text())["tables"]
    assert _code_constants("_TABLE") == set(tables)
    assert _code_constants("_CONTAINER") <= _main_list("containers")
