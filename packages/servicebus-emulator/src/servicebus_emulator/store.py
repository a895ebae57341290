"""Durability with --data-dir: every change is in SQLite (WAL) before the client hears of it.

A write-through copy of the broker's state, read back once at start. In WAL mode with
``synchronous=NORMAL`` a commit is in the OS before the broker acknowledges it, so a killed
process (kill -9 included) loses nothing it acknowledged; only a power cut could. Of a lock the
store keeps only that a message was delivered under one (``locked``): a restart ends every lock,
and such a message comes back as after a lock expiry, its delivery counted.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from .codec import decode_all, encode, skip, write_map_body
from .message import Incoming, Message
from .sections import MESSAGE_ANNOTATIONS, raw_map_items

_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    entity TEXT NOT NULL, seq INTEGER NOT NULL, dead INTEGER NOT NULL, state INTEGER NOT NULL,
    message_id TEXT, session_id TEXT, enqueued_at INTEGER NOT NULL, ttl_ms INTEGER,
    expires_at INTEGER, scheduled_at INTEGER, delivery_count INTEGER NOT NULL,
    header BLOB NOT NULL, annotations BLOB NOT NULL, properties BLOB NOT NULL,
    application_properties BLOB NOT NULL, body BLOB NOT NULL, locked INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (entity, seq));
CREATE TABLE IF NOT EXISTS session_states (
    entity TEXT NOT NULL, session_id TEXT NOT NULL, state BLOB NOT NULL,
    PRIMARY KEY (entity, session_id));
CREATE TABLE IF NOT EXISTS sequences (entity TEXT PRIMARY KEY, last INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS duplicates (
    entity TEXT NOT NULL, message_id TEXT NOT NULL, expires_at INTEGER NOT NULL,
    PRIMARY KEY (entity, message_id));
CREATE TABLE IF NOT EXISTS catalog (
    position INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL UNIQUE, path TEXT NOT NULL,
    kind TEXT NOT NULL, description BLOB, replaces INTEGER NOT NULL DEFAULT 0);
"""


class Store(Protocol):
    def put(self, entity: str, message: Message) -> None: ...
    def delete(self, entity: str, sequence_number: int) -> None: ...
    def locked(self, entity: str, sequence_number: int, locked: bool) -> None: ...
    def session_state(self, entity: str, session_id: str, state: bytes | None) -> None: ...
    def sequence(self, entity: str, last: int) -> None: ...
    def duplicate(self, entity: str, message_id: str, expires_at: int) -> None: ...
    def record(self, path: str, kind: str, description: bytes | None) -> None: ...
    def forget(self, path: str) -> None: ...
    def records(self) -> list[tuple[str, str, bytes | None, bool]]: ...
    def commit(self) -> None: ...
    def close(self) -> None: ...


class MemoryStore:
    """The default: nothing survives a restart."""

    def put(self, entity: str, message: Message) -> None:
        pass

    def delete(self, entity: str, sequence_number: int) -> None:
        pass

    def locked(self, entity: str, sequence_number: int, locked: bool) -> None:
        pass

    def session_state(self, entity: str, session_id: str, state: bytes | None) -> None:
        pass

    def sequence(self, entity: str, last: int) -> None:
        pass

    def duplicate(self, entity: str, message_id: str, expires_at: int) -> None:
        pass

    def record(self, path: str, kind: str, description: bytes | None) -> None:
        pass

    def forget(self, path: str) -> None:
        pass

    def records(self) -> list[tuple[str, str, bytes | None, bool]]:
        return []

    def commit(self) -> None:
        pass

    def close(self) -> None:
        pass


class SqliteStore:
    def __init__(self, data_dir: Path) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(data_dir / "servicebus.sqlite3", isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(messages)")}
        if "locked" not in columns:  # a data dir written before locks were recorded
            self._db.execute("ALTER TABLE messages ADD COLUMN locked INTEGER NOT NULL DEFAULT 0")
        self._dirty = False
        self._db.execute("BEGIN")

    def _write(self, sql: str, values: tuple[Any, ...]) -> None:
        self._db.execute(sql, values)
        self._dirty = True

    def put(self, entity: str, message: Message) -> None:
        self._write(
            "INSERT OR REPLACE INTO messages VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                entity,
                message.sequence_number,
                int(message.dead_lettered),
                message.state,
                message.message_id,
                message.session_id,
                message.enqueued_at,
                message.ttl_ms,
                message.expires_at,
                message.scheduled_at,
                message.delivery_count,
                encode(message.header),
                b"".join(raw for _, raw in message.annotations),
                message.properties,
                message.application_properties,
                message.body,
                int(message.lock_token is not None),
            ),
        )

    def delete(self, entity: str, sequence_number: int) -> None:
        self._write("DELETE FROM messages WHERE entity=? AND seq=?", (entity, sequence_number))

    def locked(self, entity: str, sequence_number: int, locked: bool) -> None:
        self._write(
            "UPDATE messages SET locked=? WHERE entity=? AND seq=?",
            (int(locked), entity, sequence_number),
        )

    def session_state(self, entity: str, session_id: str, state: bytes | None) -> None:
        if state is None:
            self._write(
                "DELETE FROM session_states WHERE entity=? AND session_id=?", (entity, session_id)
            )
        else:
            self._write(
                "INSERT OR REPLACE INTO session_states VALUES (?,?,?)", (entity, session_id, state)
            )

    def sequence(self, entity: str, last: int) -> None:
        self._write("INSERT OR REPLACE INTO sequences VALUES (?,?)", (entity, last))

    def duplicate(self, entity: str, message_id: str, expires_at: int) -> None:
        self._write(
            "INSERT OR REPLACE INTO duplicates VALUES (?,?,?)", (entity, message_id, expires_at)
        )

    def record(self, path: str, kind: str, description: bytes | None) -> None:
        """What the management API did to an entity: its description as the client sent it,
        or None when it was deleted (the records of the entities under it go with it). An
        entity keeps its first position, so a restart replays a topic before its subscriptions
        whatever was updated since; one created again after a delete replaces what the config
        file declares under that name (``replaces``)."""
        key = path.lower()  # Service Bus names are case-insensitive
        if description is None:
            self._write("DELETE FROM catalog WHERE key LIKE ? ESCAPE '\\'", (_below(key),))
        self._write(
            "INSERT INTO catalog (key, path, kind, description) VALUES (?,?,?,?) "
            "ON CONFLICT(key) DO UPDATE SET path=excluded.path, kind=excluded.kind, "
            "description=excluded.description, "
            "replaces=catalog.replaces OR catalog.description IS NULL",
            (key, path, kind, description),
        )

    def forget(self, path: str) -> None:
        """Everything stored for an entity and for those under it (its subscriptions...)."""
        for table in ("messages", "session_states", "sequences", "duplicates"):
            self._write(
                f"DELETE FROM {table} WHERE lower(entity)=? OR lower(entity) LIKE ? ESCAPE '\\'",
                (path.lower(), _below(path.lower())),
            )

    def commit(self) -> None:
        """Make everything since the last commit durable: called after each operation and
        before any bytes go to a client, so no client hears of a change the store lacks."""
        if not self._dirty:
            return
        if self._db.in_transaction:
            self._db.execute("COMMIT")
        self._db.execute("BEGIN")
        self._dirty = False

    def close(self) -> None:
        if self._db.in_transaction:
            self._db.execute("COMMIT")
        self._db.close()

    # reading back at start

    def messages(self) -> Iterator[tuple[str, Message, bool]]:
        """(entity, message, whether it was delivered under a lock when the process ended)."""
        rows = self._db.execute("SELECT * FROM messages ORDER BY entity, seq")
        for row in rows:
            (entity, seq, dead, state, message_id, session_id, enqueued_at, ttl_ms) = row[:8]
            (expires_at, scheduled_at, delivery_count, header, annotations) = row[8:13]
            content = Incoming(
                message_id, session_id, ttl_ms, scheduled_at, list(decode_all(header) or []),
                _annotation_items(annotations), row[13], row[14], row[15],
            )  # fmt: skip
            message = content.stored(seq, enqueued_at, expires_at, state)
            message.delivery_count = delivery_count
            message.dead_lettered = bool(dead)
            yield entity, message, bool(row[16])

    def session_states(self) -> Iterator[tuple[str, str, bytes]]:
        yield from self._db.execute("SELECT entity, session_id, state FROM session_states")

    def sequences(self) -> dict[str, int]:
        return dict(self._db.execute("SELECT entity, last FROM sequences").fetchall())

    def records(self) -> list[tuple[str, str, bytes | None, bool]]:
        """(path, kind, description or None when deleted, whether it replaces what the config
        declares), in the order they are replayed."""
        rows = self._db.execute(
            "SELECT path, kind, description, replaces FROM catalog ORDER BY position"
        ).fetchall()
        return [
            (path, kind, description, bool(replaces)) for path, kind, description, replaces in rows
        ]

    def duplicates(self) -> Iterator[tuple[str, str, int]]:
        yield from self._db.execute("SELECT entity, message_id, expires_at FROM duplicates")


def _below(path: str) -> str:
    """A LIKE pattern for the paths under ``path`` (its wildcards escaped)."""
    return path.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "/%"


def _annotation_items(raw: bytes) -> list[tuple[Any, bytes]]:
    """Stored as the concatenated key/value items: wrap them to reuse the section reader."""
    if not raw:
        return []
    count, pos = 0, 0
    while pos < len(raw):
        pos = skip(raw, skip(raw, pos))
        count += 2
    section = bytearray((0x00, 0x53, MESSAGE_ANNOTATIONS))
    write_map_body(section, raw, count)
    return raw_map_items(bytes(section))
