"""One AMQP connection per socket: protocol headers, SASL, open and close, heartbeats, and
the frame parser that hands each frame of a session to what handles it: attach.py, inbound.py,
settlement.py, or the session itself (session.py).

Frames are handled strictly in order (the SDK pipelines Open, Begin and its CBS attaches without
waiting), each by a plain method that finishes before the next frame is read, so the broker
needs no locks. A malformed frame closes only its own connection, with an AMQP error, and never
the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
from typing import Any, cast

from . import attach, inbound, settlement
from .broker import Broker
from .codec import Array, DecodeError, Described, UByte, UInt, UShort, decode
from .framing import (
    AMQP_HEADER,
    ATTACH,
    BEGIN,
    CLOSE,
    DETACH,
    DISPOSITION,
    END,
    FLOW,
    FRAME_HEADER,
    MAX_FRAME_SIZE,
    OPEN,
    PRE_OPEN_FRAME_LIMIT,
    SASL_HEADER,
    SASL_INIT,
    SASL_MECHANISMS,
    SASL_OUTCOME,
    SESSION_WINDOW,
    TRANSFER,
    ProtocolError,
    disposition_fields,
    error,
    field_list,
    frame,
    performative,
)
from .session import AmqpSession

log = logging.getLogger(__name__)

IDLE_TIMEOUT = 240.0  # seconds; the SDKs send empty frames well within it


# ----------------------------------------------------------------------------------- connection


class Connection(asyncio.Protocol):
    """One client connection: parses frames as bytes arrive (no stream reader, no task per
    connection: a completion round trip is one callback) and dispatches them synchronously."""

    HANDSHAKE_TIMEOUT = 30.0
    WRITE_BUFFER_HIGH = 4 * 1024 * 1024  # beyond this, stop reading until the client catches up

    def __init__(
        self,
        broker: Broker,
        registry: set[Connection] | None = None,
        idle_timeout: float = IDLE_TIMEOUT,
    ) -> None:
        self.broker = broker
        self.registry = registry if registry is not None else set()
        self.idle_timeout = idle_timeout  # advertised in open; silence past it closes
        self._last_input = 0.0
        self._idle_check: asyncio.TimerHandle | None = None
        self.transport: asyncio.Transport | None = None
        self.sessions: dict[int, AmqpSession] = {}  # by the client's channel
        self.remote_max_frame = 512
        self.opened = False
        self.closed = False
        self.heartbeat: asyncio.Task[None] | None = None
        self.peer: Any = None
        self.ended: set[int] = set()  # channels the client ended; late frames are ignored
        self._stage = _HEADER  # protocol header, then SASL init, then the AMQP header, frames
        self._out = bytearray()
        self._flush_scheduled = False
        self._dispatching = False
        self._in = bytearray()
        self._deadline: asyncio.TimerHandle | None = None

    # ---------------------------------------------------------------- transport callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self.registry.add(self)
        self.peer = transport.get_extra_info("peername")
        sock = transport.get_extra_info("socket")
        if sock is not None:  # small frames must not wait for Nagle + delayed ACK (40 ms)
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.transport.set_write_buffer_limits(high=self.WRITE_BUFFER_HIGH)
        self._deadline = asyncio.get_running_loop().call_later(
            self.HANDSHAKE_TIMEOUT, self._handshake_timed_out
        )

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self._last_input = asyncio.get_running_loop().time()
        self._in += data
        self._dispatching = True
        try:
            self._process()
        except ProtocolError as failure:
            log.info("closing %s: %s", self.peer, failure.description)
            self._close(error(failure.condition, failure.description))
        except DecodeError as failure:
            log.info("closing %s: malformed frame: %s", self.peer, failure)
            self._close(error("amqp:decode-error", str(failure)))
        except ConnectionError:
            self.closed = True
        except Exception:
            log.exception("internal error on the connection from %s", self.peer)
            self._close(error("amqp:internal-error", "The emulator hit an internal error."))
        finally:
            self._dispatching = False
        self.flush()
        if self.closed:
            self._cleanup()

    def eof_received(self) -> bool | None:
        return None  # close the transport; connection_lost cleans up

    def connection_lost(self, exc: Exception | None) -> None:
        self._cleanup()

    def pause_writing(self) -> None:
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.resume_reading()

    # ---------------------------------------------------------------- output

    def write(self, data: bytes) -> None:
        """Queue bytes; everything queued while handling one read, or in one turn of the event
        loop, goes out as one write."""
        if self.closed:
            return
        self._out += data
        if not self._dispatching and not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        """Write what is queued, once the store holds every change the bytes tell of (a
        delivery's lock included: a crash right after it must still count the delivery)."""
        self._flush_scheduled = False
        if self._out and self.transport is not None and not self.transport.is_closing():
            self.broker.store.commit()
            self.transport.write(bytes(self._out))
        self._out.clear()

    # ---------------------------------------------------------------- input

    def _process(self) -> None:
        """Handle every complete header and frame in the buffer; keep the incomplete rest."""
        buffer = self._in
        pos = 0
        try:
            while not self.closed:
                available = len(buffer) - pos
                if self._stage != _FRAMES and self._stage != _SASL_INIT:
                    if available < 8:
                        break
                    self._on_protocol_header(bytes(buffer[pos : pos + 8]))
                    pos += 8
                    continue
                if available < 8:
                    break
                size, doff, kind, channel = FRAME_HEADER.unpack_from(buffer, pos)
                limit = MAX_FRAME_SIZE if self.opened else PRE_OPEN_FRAME_LIMIT
                if size < 8 or size > limit or doff < 2 or doff * 4 > size:
                    raise ProtocolError(
                        "amqp:connection:framing-error",
                        f"invalid frame header (size {size}, doff {doff}); "
                        f"max frame size is {limit}",
                    )
                if available < size:
                    break
                body = memoryview(bytes(buffer[pos + doff * 4 : pos + size]))
                pos += size
                sasl = self._stage == _SASL_INIT
                if kind != (1 if sasl else 0):
                    raise ProtocolError(
                        "amqp:connection:framing-error", f"unexpected frame type {kind}"
                    )
                if not body:
                    if sasl:
                        raise ProtocolError("amqp:not-allowed", "expected sasl-init")
                    continue  # heartbeat
                if sasl:
                    self._on_sasl_init(body)
                    continue
                if body[:3] == b"\x00\x53\x15":  # disposition: one per settled message
                    fields = disposition_fields(body)
                    if fields is not None:
                        self._dispatch(channel, DISPOSITION, fields, body[:0])
                        continue
                value, end = decode(body, 0)
                if not isinstance(value, Described) or not isinstance(value.descriptor, int):
                    raise ProtocolError(
                        "amqp:decode-error", "a frame body must be a described list"
                    )
                self._dispatch(channel, value.descriptor, field_list(value.value, 14), body[end:])
        finally:
            del buffer[:pos]

    def _on_protocol_header(self, header: bytes) -> None:
        if self._stage == _HEADER and header == SASL_HEADER:
            self.write(SASL_HEADER)
            mechanisms = Array(0xB3, ("ANONYMOUS", "MSSBCBS", "PLAIN"))
            self.write(frame(0, performative(SASL_MECHANISMS, [mechanisms]), kind=1))
            self._stage = _SASL_INIT
            return
        self.write(AMQP_HEADER)
        if header != AMQP_HEADER:
            raise ConnectionError("unsupported protocol header")
        self._stage = _FRAMES
        if self._deadline is not None:
            self._deadline.cancel()
        self._idle_check = asyncio.get_running_loop().call_later(
            self.idle_timeout, self._check_idle
        )

    def _on_sasl_init(self, body: memoryview) -> None:
        value, _ = decode(body, 0)
        if not isinstance(value, Described) or value.descriptor != SASL_INIT:
            raise ProtocolError("amqp:not-allowed", "expected sasl-init")
        self.write(frame(0, performative(SASL_OUTCOME, [UByte(0)]), kind=1))
        self._stage = _AMQP_HEADER

    def _handshake_timed_out(self) -> None:
        if self._stage != _FRAMES and self.transport is not None:
            log.info("closing %s: no AMQP handshake within %ss", self.peer, self.HANDSHAKE_TIMEOUT)
            self.transport.close()

    def _check_idle(self) -> None:
        """A client must send something (an empty frame will do) within the idle time-out
        the emulator advertised; one that went silent is closed, as AMQP lets a peer do."""
        if self.closed:
            return
        loop = asyncio.get_running_loop()
        silent = loop.time() - self._last_input
        if silent < self.idle_timeout:
            self._idle_check = loop.call_later(self.idle_timeout - silent, self._check_idle)
            return
        log.info("closing %s: nothing received for %.0f s", self.peer, silent)
        self._close(
            error(
                "amqp:resource-limit-exceeded",
                f"The connection was idle for more than {self.idle_timeout:g} s (the idle "
                "time-out in the emulator's open); send empty frames to keep it.",
            )
        )
        self.flush()
        self._cleanup()

    def _dispatch(self, channel: int, code: int, fields: list[Any], payload: memoryview) -> None:
        if code == OPEN:
            self._on_open(fields)
            return
        if not self.opened:
            raise ProtocolError("amqp:not-allowed", "the first frame must be open")
        if code == CLOSE:
            self.write(frame(0, performative(CLOSE, [])))
            self.closed = True
            return
        if code == BEGIN:
            if channel in self.sessions:
                raise ProtocolError("amqp:not-allowed", f"channel {channel} is in use")
            local = 0
            used = {s.channel for s in self.sessions.values()}
            while local in used:
                local += 1
            session = self.sessions[channel] = AmqpSession(self, local, channel)
            session.next_incoming_id = fields[1] if isinstance(fields[1], int) else 0
            session.window_base = session.next_incoming_id
            session.send(
                BEGIN,
                [UShort(channel), UInt(0), UInt(SESSION_WINDOW), UInt(SESSION_WINDOW),
                 UInt(0xFFFFFFFF)],
            )  # fmt: skip
            return
        found = self.sessions.get(channel)
        if found is None and channel in self.ended:
            return  # the client ends a session and may still send for it; nothing to do
        if found is None:
            raise ProtocolError("amqp:not-found", f"no session on channel {channel}")
        session = found
        if code == ATTACH:
            attach.on_attach(session, fields)
        elif code == FLOW:
            session.on_flow(fields)
        elif code == TRANSFER:
            inbound.on_transfer(session, fields, payload)
        elif code == DISPOSITION:
            settlement.on_disposition(session, fields)
        elif code == DETACH:
            attach.on_detach(session, fields)
        elif code == END:
            session.end()
            del self.sessions[channel]
            self.ended.add(channel)
            session.send(END, [])
        else:
            raise ProtocolError("amqp:not-implemented", f"unknown performative 0x{code:02x}")

    def _on_open(self, fields: list[Any]) -> None:
        if self.opened:
            raise ProtocolError("amqp:not-allowed", "open was already received")
        self.opened = True
        max_frame = fields[2] if isinstance(fields[2], int) else 0xFFFFFFFF
        self.remote_max_frame = max(512, min(max_frame, 1024 * 1024))
        idle = fields[4]
        self.write(
            frame(
                0,
                performative(
                    OPEN,
                    [
                        "servicebus-emulator",
                        None,
                        UInt(MAX_FRAME_SIZE),
                        UShort(65535),
                        UInt(int(self.idle_timeout * 1000)),
                    ],
                ),
            )
        )
        if isinstance(idle, int) and idle > 0:
            self.heartbeat = asyncio.get_running_loop().create_task(self._beat(idle / 2000))

    async def _beat(self, interval: float) -> None:
        while not self.closed:
            await asyncio.sleep(interval)
            self.write(struct.pack(">IBBH", 8, 2, 0, 0))

    def _close(self, failure: Described) -> None:
        if not self.closed:
            try:
                if self.opened:
                    self.write(frame(0, performative(CLOSE, [failure])))
            finally:
                self.closed = True

    def _cleanup(self) -> None:
        """Idempotent: after a close, an error or the client going away."""
        self.closed = True
        self.registry.discard(self)
        if self._deadline is not None:
            self._deadline.cancel()
        if self._idle_check is not None:
            self._idle_check.cancel()
        if self.heartbeat is not None:
            self.heartbeat.cancel()
        sessions = list(self.sessions.values())
        self.sessions.clear()
        for session in sessions:
            session.end()
        self.broker.store.commit()  # what ending the sessions changed (session locks released)
        if self.transport is not None and not self.transport.is_closing():
            with contextlib.suppress(Exception):
                if self._out:
                    self.transport.write(bytes(self._out))
                self._out.clear()
                self.transport.close()


_HEADER, _SASL_INIT, _AMQP_HEADER, _FRAMES = range(4)
