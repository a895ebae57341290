"""A stored shape as what a reader depends on, and its fingerprint: each entity's
PartitionKey and RowKey (the samples are fixed, so the keys are too), each property's name and
type, and the structure (names and types) of JSON held in a string property or a body. Not
the values: a description's wording is no shape."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from azure.data.tables import EntityProperty, TableClient, TableServiceClient
from azure.storage.blob import BlobServiceClient, ContainerClient
from azure.storage.queue import QueueClient, QueueServiceClient


@dataclass
class Storage:
    """Fresh tables and containers on Azurite, each deleted by ``close``."""

    tables: TableServiceClient
    blobs: BlobServiceClient
    queues: QueueServiceClient
    _made: list[Callable[[], object]] = field(default_factory=list)

    def table(self) -> TableClient:
        name = f"shape{uuid.uuid4().hex}"
        self._made.append(lambda: self.tables.delete_table(name))
        return self.tables.create_table(name)

    def container(self) -> ContainerClient:
        container = self.blobs.create_container(f"shape-{uuid.uuid4().hex}")
        self._made.append(container.delete_container)
        return container

    def queue(self) -> QueueClient:
        queue = self.queues.create_queue(f"shape-{uuid.uuid4().hex}")
        self._made.append(queue.delete_queue)
        return queue

    def close(self) -> None:
        for delete in self._made:
            delete()


def fingerprint(structure: object) -> str:
    """12 hex digits of the SHA-256 of the structure's canonical JSON."""
    canonical = json.dumps(structure, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def structure_of(value: Any) -> Any:
    """Names and types, recursively; JSON in a string or in bytes by its own structure."""
    if isinstance(value, Mapping):
        return {str(k): structure_of(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return sorted({json.dumps(structure_of(v), sort_keys=True) for v in value})
    if isinstance(value, EntityProperty):
        return f"edm:{getattr(value.edm_type, 'value', value.edm_type)}"
    if isinstance(value, str | bytes) and value[:1] in ("{", "[", b"{", b"["):
        try:
            return {"json": structure_of(json.loads(value))}
        except ValueError:
            pass
    if isinstance(value, datetime):
        return "datetime"
    return type(value).__name__


def entities(table: TableClient, *, keys: Mapping[str, str] | None = None) -> list[str]:
    """The table's entities as stored: keys as they are (a value of ``keys`` made random by
    the writer named by its placeholder), properties by structure."""
    shaped = []
    for entity in table.list_entities():
        partition, row = entity["PartitionKey"], entity["RowKey"]
        for value, placeholder in (keys or {}).items():
            partition, row = partition.replace(value, placeholder), row.replace(value, placeholder)
        properties = {k: v for k, v in entity.items() if k not in ("PartitionKey", "RowKey")}
        shaped.append(
            json.dumps(
                {"PartitionKey": partition, "RowKey": row, **structure_of(properties)},
                sort_keys=True,
            )
        )
    return sorted(shaped)
