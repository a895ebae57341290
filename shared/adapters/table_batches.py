"""Entity group transactions and continuation tokens of Azure Tables, for every table adapter."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from azure.data.tables import TableClient, UpdateMode

from ..domain.errors import InvalidInput
from .table_transactions import TableTransactions

TRANSACTION_MAX_OPERATIONS = 100  # Table Storage's limit (and Azurite breaks above it)
TRANSACTION_MAX_BYTES = 3 * 1024 * 1024  # under the 4 MiB request limit, with room for JSON
_TOKEN_KEYS = frozenset({"PartitionKey", "RowKey"})


def upsert_in_transactions(
    table: TableClient,
    entities: Sequence[dict[str, Any]],
    *,
    mode: UpdateMode = UpdateMode.REPLACE,
    transactions: TableTransactions | None = None,
) -> int:
    """Upsert entities of one partition in as few transactions as the limits allow; return
    how many it took. Sent by ``transactions`` when given (``table_transactions``), else by
    the SDK."""
    count = 0
    for chunk in _chunks(entities):
        if transactions is not None:
            transactions.upsert(table.table_name, chunk, mode)
        else:
            table.submit_transaction([("upsert", entity, {"mode": mode}) for entity in chunk])
        count += 1
    return count


def _chunks(entities: Iterable[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """At most 100 operations and about 3 MiB per transaction."""
    chunk: list[dict[str, Any]] = []
    size = 0
    for entity in entities:
        entity_size = _approximate_size(entity)
        if chunk and (
            len(chunk) == TRANSACTION_MAX_OPERATIONS or size + entity_size > TRANSACTION_MAX_BYTES
        ):
            yield chunk
            chunk, size = [], 0
        chunk.append(entity)
        size += entity_size
    if chunk:
        yield chunk


def _approximate_size(entity: dict[str, Any]) -> int:
    size = 0
    for key, value in entity.items():
        size += len(key) + 16
        if isinstance(value, bytes):
            size += (len(value) * 4) // 3 + 4  # base64 on the wire
        else:
            size += len(str(value).encode("utf-8")) * 2
    return size


def encode_token(token: Any) -> str | None:
    """The SDK's continuation token as an opaque string for a client to pass back."""
    if not token:
        return None
    raw = json.dumps(token, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_token(token: str | None) -> dict[str, str] | None:
    """The SDK's continuation token from ``encode_token``'s string; raises ``InvalidInput``
    ("continuation") for anything else."""
    if not token:
        return None
    try:
        padded = token + "=" * (-len(token) % 4)
        decoded = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, UnicodeDecodeError) as error:
        raise InvalidInput("continuation", "is not a token this API returned") from error
    if (
        not isinstance(decoded, dict)
        or not decoded
        or not set(decoded) <= _TOKEN_KEYS
        or not all(isinstance(value, str) for value in decoded.values())
    ):
        raise InvalidInput("continuation", "is not a token this API returned")
    return decoded
