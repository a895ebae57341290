"""The emulator process: the AMQP listener, the broker's timers and a small HTTP status port."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from pathlib import Path
from typing import Any

from .broker import Broker
from .config import NamespaceConfig
from .connection import Connection
from .store import SqliteStore, Store
from .timers import now_ms

log = logging.getLogger("localdev.servicebus_emulator")

CONNECTION_STRING = (
    "Endpoint=sb://{host}:{port};SharedAccessKeyName=RootManageSharedAccessKey;"
    "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"
)
IDLE_WAKE_MS = 1000


class Emulator:
    def __init__(self, namespace: NamespaceConfig, data_dir: Path | None = None) -> None:
        self.store: Store | None = SqliteStore(data_dir) if data_dir else None
        self.broker = Broker(namespace, self.store)
        self.connections: set[Connection] = set()
        self._servers: list[asyncio.base_events.Server] = []
        self._ticker: asyncio.Task[None] | None = None

    async def start(self, host: str, port: int, http_port: int | None) -> tuple[int, int | None]:
        amqp = await asyncio.get_running_loop().create_server(
            lambda: Connection(self.broker, self.connections), host, port, backlog=512
        )
        self._servers.append(amqp)
        port = amqp.sockets[0].getsockname()[1]
        if http_port is not None:
            http = await asyncio.start_server(self._http, host, http_port)
            self._servers.append(http)
            http_port = http.sockets[0].getsockname()[1]
        self._ticker = asyncio.get_running_loop().create_task(self._tick())
        return port, http_port

    async def close(self) -> None:
        for server in self._servers:
            server.close()
        if self._ticker:
            self._ticker.cancel()
        for connection in list(self.connections):
            connection.connection_lost(None)
        if self.store is not None:
            self.store.close()

    async def _tick(self) -> None:
        """Sleep until the next timer is due (lock expiry, scheduled message, TTL), or until the
        broker sets an earlier one; an idle emulator wakes once a second."""
        woken = asyncio.Event()
        self.broker.timers.wake = woken.set
        while True:
            due = self.broker.timers.next_due()
            until = now_ms() + IDLE_WAKE_MS if due is None else min(due, now_ms() + IDLE_WAKE_MS)
            self.broker.timers.sleeping_until = until
            woken.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), max(0.001, (until - now_ms()) / 1000))
            self.broker.timers.sleeping_until = None
            try:
                self.broker.tick()
            except Exception:
                log.exception("timer processing failed")

    async def _http(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """GET /health and GET /queues (counts per queue), for scripts and people."""
        try:
            request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=5)
            path = request.split(b" ", 2)[1].decode("ascii", "replace") if b" " in request else ""
            body: dict[str, Any]
            if path == "/health":
                status, body = "200 OK", {"status": "ready", "connections": len(self.connections)}
            elif path == "/queues":
                status, body = "200 OK", self.broker.counts()
            else:
                status, body = "404 Not Found", {"error": "try /health or /queues"}
            payload = json.dumps(body).encode()
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode()
                + payload
            )
            await writer.drain()
        except (
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            TimeoutError,
            ConnectionError,
        ):
            pass
        finally:
            writer.close()
