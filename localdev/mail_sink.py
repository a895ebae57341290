"""An SMTP server for the local stack: it accepts every message and keeps it (parsed), so a
demo or a test can see which receipts went out. Nothing is relayed."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any

from localdev.ports import free_port


@dataclass
class MailSink:
    """``echo`` prints one line per message."""

    host: str
    port: int
    echo: bool = False
    messages: list[EmailMessage] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = message_from_bytes(envelope.original_content, policy=policy.default)
        assert isinstance(message, EmailMessage)
        with self._lock:
            self.messages.append(message)
        if self.echo:
            print(f"[smtp] {message['Subject']!s} -> {', '.join(envelope.rcpt_tos)}", flush=True)
        return "250 OK"

    def received(self) -> list[EmailMessage]:
        with self._lock:
            return list(self.messages)


@contextmanager
def run_mail_sink(port: int | None = None, *, echo: bool = False) -> Iterator[MailSink]:
    """Listen on 127.0.0.1:``port`` (a free port when ``None``) until the block ends."""
    from aiosmtpd.controller import Controller

    sink = MailSink(host="127.0.0.1", port=port or free_port(), echo=echo)
    controller = Controller(sink, hostname=sink.host, port=sink.port)
    controller.start()
    try:
        yield sink
    finally:
        controller.stop()
