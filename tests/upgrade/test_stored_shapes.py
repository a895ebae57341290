"""Every shape the app stores, sends or derives from a key is listed in docs/deploy.md
("Stored shapes") with its writer, its readers and its fingerprint, and each fingerprint has a
note under "Changes to stored shapes": a change to a stored shape without a note there fails
here. The shapes are written by their real writers (``stored_shapes``), tables and blobs on
Azurite."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from localdev.stack_layout import REPO_ROOT
from shared.adapters.azure_clients import blob_service, queue_service, table_service
from shared.bootstrap.declared import APP_TABLES
from shared.config import StorageConnectionSettings
from shared.domain.pipelines import PRODUCT_IMPORT, PURCHASE
from tests.builders import PIPELINES

from .stored_shapes import SHAPES, Storage, fingerprint

pytestmark = pytest.mark.integration

DOC = REPO_ROOT / "docs" / "deploy.md"
# A row of the table: | `shape` | stored as | written by | read by | `fingerprint` |
ROW = re.compile(r"^\| `([^`]+)` \|([^|]+)\|([^|]+)\|([^|]+)\| `([0-9a-f]{12})` \|$")
# A note: - `shape` `fingerprint`: what changed and how both releases read it
NOTE = re.compile(r"^- `([^`]+)` `([0-9a-f]{12})`: \S")


@pytest.fixture(scope="module")
def computed(azurite_connection_string: str) -> Iterator[dict[str, str]]:
    settings = StorageConnectionSettings(connection_string=azurite_connection_string)
    storage = Storage(table_service(settings), blob_service(settings), queue_service(settings))
    try:
        yield {name: fingerprint(shape(storage)) for name, shape in SHAPES.items()}
    finally:
        storage.close()


def section(title: str) -> list[str]:
    lines = DOC.read_text().splitlines()
    start = lines.index(title) + 1
    end = next((n for n in range(start, len(lines)) if lines[n].startswith("#")), len(lines))
    return lines[start:end]


def listed() -> dict[str, tuple[str, ...]]:
    """shape -> (stored as, written by, read by, fingerprint), from the table."""
    rows = [ROW.match(line) for line in section("### Stored shapes")]
    return {m[1]: tuple(cell.strip() for cell in m.groups()[1:]) for m in rows if m}


def noted() -> set[tuple[str, str]]:
    return {(m[1], m[2]) for m in map(NOTE.match, section("### Changes to stored shapes")) if m}


def test_every_stored_shape_is_listed_with_its_writer_readers_and_fingerprint(
    computed: dict[str, str],
) -> None:
    rows = listed()
    assert sorted(rows) == sorted(computed), (
        "docs/deploy.md's table of stored shapes lists other shapes than "
        "tests/upgrade/stored_shapes.py writes: list each once, with its writer and readers"
    )
    assert all(all(cells[:3]) for cells in rows.values()), rows
    changed = {
        name: f"{rows[name][3]} -> {computed[name]}"
        for name in computed
        if rows[name][3] != computed[name]
    }
    assert not changed, (
        f"Stored shapes changed: {changed}. A release reads what the one before it wrote and "
        "the one before reads what it writes (docs/deploy.md, 'Upgrading'): say under "
        "'Changes to stored shapes' how this change keeps that rule, as "
        "- `<shape>` `<new fingerprint>`: ..., and put the new fingerprint in the table"
    )


def test_every_fingerprint_listed_has_a_note() -> None:
    missing = {(name, cells[3]) for name, cells in listed().items()} - noted()
    assert not missing, (
        f"No note under 'Changes to stored shapes' in docs/deploy.md for {sorted(missing)}: "
        "say what changed and how the release before and this one both read it"
    )


# The pipelines whose tables this release's shapes cover. A pipeline added since keeps its
# own tables; docs/pipelines.md ("Before its first upgrade") says how to list them here.
RECORDED_PIPELINES = (PURCHASE, PRODUCT_IMPORT)


def test_every_table_the_app_keeps_is_a_stored_shape() -> None:
    # A table added to the app without a shape here would change without a note.
    added = {t for p in PIPELINES if p.name not in RECORDED_PIPELINES for t in p.tables}
    kept = set(APP_TABLES) - added
    assert kept <= set(SHAPES), sorted(kept - set(SHAPES))
