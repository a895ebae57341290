"""Moving the catalog's products of the earlier layout (PartitionKey = the SKU, RowKey
``product``) to the partitions ``TableProductCatalog`` writes now, without going back in time.

A product of the earlier layout is copied only where its partition holds nothing or an older
write of it: an import that wrote the product under its new keys since is kept. Both writes are
conditional on what was read (ETags): the copy on the target as read (or on its absence), the
delete on the old entity as read, so an instance of an earlier release that writes the old
entity while the move runs keeps its write (the move leaves the entity for its next run, which
copies it). Interrupted anywhere, the move is run again: it goes on where it stopped.

"Older" compares Table Storage's own write times (``Timestamp``): a copy carries the write
time of the entity it was copied from (``MovedFrom``), so it counts as that old, not as the
moment of the copy. An import replaces the whole entity, and with it ``MovedFrom``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from azure.core import MatchConditions
from azure.core.exceptions import (
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
)
from azure.data.tables import TableClient, TableEntity, UpdateMode

LEGACY_ROW = "product"
MOVED_FROM = "MovedFrom"

Outcome = Literal["moved", "newer", "skipped"]


@dataclass(frozen=True)
class ProductMove:
    """What a run of the move did, by SKU.

    ``moved``: copied to their partition, where they were absent or older; the old entity
    deleted. ``newer``: their partition held a newer write (an import since the deploy), kept;
    the old entity deleted. ``skipped``: written by someone else while the move ran (the old
    entity or the new one); left as they are for the next run."""

    moved: tuple[str, ...] = ()
    newer: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()

    def summary(self) -> str:
        text = (
            f"moved {len(self.moved)} product(s) to the partitioned layout, kept "
            f"{len(self.newer)} newer one(s) already there, skipped {len(self.skipped)}"
        )
        if self.skipped:
            text += f" (written while moving: run the move again): {', '.join(self.skipped)}"
        return text


def move_legacy_products(
    table: TableClient, keys_of: Callable[[str], tuple[str, str]]
) -> ProductMove:
    """Move every product of the earlier layout in ``table`` to its new keys,
    ``keys_of(sku)`` (PartitionKey, RowKey); its columns stay as they are."""
    outcomes: dict[Outcome, list[str]] = {"moved": [], "newer": [], "skipped": []}
    old_entities = list(table.query_entities("RowKey eq @row", parameters={"row": LEGACY_ROW}))
    for old in old_entities:
        sku = str(old["Sku"])
        partition, row = keys_of(sku)
        copy = {**old, "PartitionKey": partition, "RowKey": row}
        outcomes[_move(table, old, _read(table, partition, row), copy)].append(sku)
    return ProductMove(
        tuple(outcomes["moved"]), tuple(outcomes["newer"]), tuple(outcomes["skipped"])
    )


def _move(
    table: TableClient, old: TableEntity, target: TableEntity | None, copy: dict[str, Any]
) -> Outcome:
    written_at = _written_at(old)
    outcome: Outcome = "newer"
    if target is None or _version(target) < written_at:
        try:
            if target is None:
                table.create_entity({**copy, MOVED_FROM: written_at})
            else:
                table.update_entity(
                    {**copy, MOVED_FROM: written_at},
                    mode=UpdateMode.REPLACE,
                    etag=target.metadata["etag"],
                    match_condition=MatchConditions.IfNotModified,
                )
        except (ResourceExistsError, ResourceModifiedError):
            return "skipped"  # written under its new keys since it was read
        outcome = "moved"
    try:
        table.delete_entity(
            old["PartitionKey"],
            old["RowKey"],
            etag=old.metadata["etag"],
            match_condition=MatchConditions.IfNotModified,
        )
    except ResourceModifiedError:
        return "skipped"  # written since it was read: a newer write, for the next run
    except ResourceNotFoundError:
        pass  # deleted by another run of the move
    return outcome


def _read(table: TableClient, partition: str, row: str) -> TableEntity | None:
    try:
        return table.get_entity(partition, row)
    except ResourceNotFoundError:
        return None


def _written_at(entity: TableEntity) -> datetime:
    """When Table Storage last wrote the entity (every read here returns all its columns,
    ``Timestamp`` among them)."""
    timestamp: datetime | None = entity.metadata["timestamp"]
    if timestamp is None:
        raise RuntimeError(f"The entity {entity.get('Sku')!r} was read without its Timestamp")
    return timestamp


def _version(target: TableEntity) -> datetime:
    """When the product under its new keys was written: the time of the entity it was copied
    from for a copy, else its own."""
    moved_from = target.get(MOVED_FROM)
    return moved_from if isinstance(moved_from, datetime) else _written_at(target)
