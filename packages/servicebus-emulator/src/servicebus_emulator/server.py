"""The emulator process: the AMQP listener, the broker's timers, and the HTTP port (health,
counts, the management API)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from pathlib import Path

from . import http_server
from .admin import Management
from .broker import Broker
from .clock import now_ms
from .config import NamespaceConfig
from .connection import IDLE_TIMEOUT, Connection
from .store import SqliteStore, Store

log = logging.getLogger("servicebus_emulator")

CONNECTION_STRING = (
    "Endpoint=sb://{host}:{port};SharedAccessKeyName=RootManageSharedAccessKey;"
    "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"
)
IDLE_WAKE_MS = 1000


class Emulator:
    def __init__(
        self,
        namespace: NamespaceConfig,
        data_dir: Path | None = None,
        idle_timeout: float = IDLE_TIMEOUT,
    ) -> None:
        self.idle_timeout = idle_timeout
        self.store: Store | None = SqliteStore(data_dir) if data_dir else None
        self.broker = Broker(namespace, self.store)
        self.connections: set[Connection] = set()
        self._servers: list[asyncio.base_events.Server] = []
        self._ticker: asyncio.Task[None] | None = None
        self.management: Management | None = None

    async def start(self, host: str, port: int, http_port: int | None) -> tuple[int, int | None]:
        amqp = await asyncio.get_running_loop().create_server(
            lambda: Connection(self.broker, self.connections, self.idle_timeout),
            host,
            port,
            backlog=512,
        )
        self._servers.append(amqp)
        port = amqp.sockets[0].getsockname()[1]
        if http_port is not None:
            http = await asyncio.start_server(self._http, host, http_port)
            self._servers.append(http)
            http_port = http.sockets[0].getsockname()[1]
            self.management = Management(self.broker, f"http://{host}:{http_port}")
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
        await http_server.serve(reader, writer, self._respond)

    async def _respond(self, request: http_server.Request) -> http_server.Response:
        """GET /health and GET /queues (counts) for scripts and people; the rest is the
        management API of the SDKs' administration clients (admin.py)."""
        if request.method == "GET" and request.path in ("/health", "/queues", "/operations"):
            body = (
                {"status": "ready", "connections": len(self.connections)}
                if request.path == "/health"
                else self.broker.operations.snapshot()
                if request.path == "/operations"
                else self.broker.counts()
            )
            return http_server.Response(200, json.dumps(body).encode(), "application/json")
        if self.management is None:
            return http_server.Response(404, b"", "text/plain")
        return self.management.handle(request)
