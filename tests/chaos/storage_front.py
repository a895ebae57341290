"""A front for Azurite's three ports that passes every connection through, or, while
``busy``, answers every request ``503 Server Busy`` as Azure Storage does when it throttles
(the error code in the ``x-ms-error-code`` header and in the body, XML for Blob and Queue,
JSON for Table, with the headers every Storage response carries, ``Date`` and
``x-ms-request-id``: learn.microsoft.com, "Azure Storage error codes", ServerBusy, and
"Common REST API response headers").

Hand-written, small, for tests only: a byte pipe while passing, and, while busy, just enough
HTTP/1.1 to read a request (headers, a Content-Length or chunked body) and answer it on the
same kept-alive connection. Switching to busy closes the connections passing through, so the
next request meets the 503, as a client whose connection a throttling service resets; once
the front passes again, a kept-alive connection's next request goes on to Azurite."""

from __future__ import annotations

import contextlib
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.utils import formatdate
from typing import BinaryIO

from shared.adapters.azure_clients import azurite_connection_string

_BUSY_MESSAGE = "The server is currently unable to receive requests. Please retry your request."


class StorageFront:
    def __init__(self, host: str, blob_port: int, queue_port: int, table_port: int) -> None:
        self.busy = False
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self.ports = {
            kind: _Listener(self, kind, host, port)
            for kind, port in (("blob", blob_port), ("queue", queue_port), ("table", table_port))
        }
        self.answered_busy = 0

    @property
    def connection_string(self) -> str:
        return azurite_connection_string(
            blob_port=self.ports["blob"].port,
            queue_port=self.ports["queue"].port,
            table_port=self.ports["table"].port,
        )

    def set_busy(self, busy: bool) -> None:
        """From now on every request is answered 503 (``busy``), or passed to Azurite."""
        with self._lock:
            self.busy = busy
            passing = list(self._open) if busy else []
        for connection in passing:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        for listener in self.ports.values():
            listener.close()
        self.set_busy(True)

    def _track(self, connection: socket.socket) -> bool:
        with self._lock:
            if self.busy:
                return False
            self._open.add(connection)
            return True

    def _untrack(self, connection: socket.socket) -> None:
        with self._lock:
            self._open.discard(connection)


class _Listener:
    def __init__(self, front: StorageFront, kind: str, host: str, target: int) -> None:
        self._front = front
        self._kind = kind
        self._target = (host, target)
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._server.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True, name=f"front-{kind}").start()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._server.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        with client:
            first = b""
            if not self._front._track(client):
                # Busy: answered here until a request comes once the front passes again,
                # which goes on to Azurite with the rest of the connection.
                passed = _answer_busy(client, self._kind, self._front)
                if passed is None or not self._front._track(client):
                    return
                first = passed
            try:
                upstream = socket.create_connection(self._target, timeout=10)
            except OSError:
                return  # Azurite itself is down: the client sees its connection close
            upstream.settimeout(None)
            if first:
                upstream.sendall(first)
            with upstream:
                pump = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
                pump.start()
                _pipe(client, upstream)
                pump.join(timeout=5)
            self._front._untrack(client)


def _pipe(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, target):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


@dataclass
class _Request:
    method: str
    keep_alive: bool
    raw: bytes  # as the client sent it


def _answer_busy(client: socket.socket, kind: str, front: StorageFront) -> bytes | None:
    """Answer each request 503 while the front is busy; returns the first request read once
    it is not (to be passed on), or None when the client closed the connection first."""
    reader = client.makefile("rb")
    while (request := _read_request(reader)) is not None:
        if not front.busy:
            return request.raw
        if kind == "table":
            body = (
                '{"odata.error":{"code":"ServerBusy","message":{"lang":"en-US",'
                f'"value":"{_BUSY_MESSAGE}"}}}}'
            ).encode()
            content_type = "application/json;odata=minimalmetadata"
        else:
            body = (
                '<?xml version="1.0" encoding="utf-8"?><Error><Code>ServerBusy</Code>'
                f"<Message>{_BUSY_MESSAGE}</Message></Error>"
            ).encode()
            content_type = "application/xml"
        head = (
            "HTTP/1.1 503 Server Busy\r\n"
            f"Date: {formatdate(usegmt=True)}\r\n"
            f"x-ms-request-id: {uuid.uuid4()}\r\n"
            "x-ms-version: 2021-12-02\r\n"
            "x-ms-error-code: ServerBusy\r\n"
            f"Content-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n"
            f"Connection: {'keep-alive' if request.keep_alive else 'close'}\r\n\r\n"
        ).encode()
        try:
            client.sendall(head + (b"" if request.method == "HEAD" else body))
        except OSError:
            return None
        front.answered_busy += 1
        if not request.keep_alive:
            return None
    return None


def _read_request(stream: BinaryIO) -> _Request | None:
    """One request off a client's connection, as it was sent; None at the connection's end."""
    raw = bytearray()
    try:
        line = stream.readline()
        if not line:
            return None
        raw += line
        headers: dict[str, str] = {}
        while (header := stream.readline()) not in (b"\r\n", b"\n", b""):
            raw += header
            name, _, value = header.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        raw += b"\r\n"
        if headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size_line = stream.readline()
                raw += size_line
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                raw += stream.read(size + 2)
                if size == 0:
                    break
        else:
            raw += stream.read(int(headers.get("content-length") or 0))
    except (OSError, ValueError):
        return None
    method = line.split(b" ", 1)[0].decode("latin-1")
    return _Request(method, headers.get("connection", "").lower() != "close", bytes(raw))


@contextmanager
def storage_front(
    host: str, blob_port: int, queue_port: int, table_port: int
) -> Iterator[StorageFront]:
    front = StorageFront(host, blob_port, queue_port, table_port)
    try:
        yield front
    finally:
        front.close()
