"""An SMTP server for the local stack: it accepts every message and keeps it, so a demo or a
test can see which receipts went out. Nothing is relayed.

The sink runs in the process of whatever started it (the local stack shares it with the host),
so it does as little as it can per message: it keeps the bytes, and parses a message only when
someone asks for it (``received``, once per message) or reads just the headers
(``message_ids``). ``wait_for_more`` blocks until a message arrives, for watchers that would
otherwise poll."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from email.parser import BytesHeaderParser
from typing import Any

from localdev.ports import free_port

_HEADERS = BytesHeaderParser(policy=policy.compat32)


@dataclass
class MailSink:
    """``echo`` prints one line per message."""

    host: str
    port: int
    echo: bool = False
    _raw: list[bytes] = field(default_factory=list)
    _parsed: list[EmailMessage] = field(default_factory=list)
    _arrived: threading.Condition = field(default_factory=threading.Condition)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        raw = bytes(envelope.original_content)
        with self._arrived:
            self._raw.append(raw)
            self._arrived.notify_all()
        if self.echo:
            subject = _HEADERS.parsebytes(raw).get("Subject", "")
            print(f"[smtp] {subject} -> {', '.join(envelope.rcpt_tos)}", flush=True)
        return "250 OK"

    def received(self) -> list[EmailMessage]:
        """Every message so far, parsed (``email.policy.default``), in the order received."""
        with self._arrived:
            for raw in self._raw[len(self._parsed) :]:
                message = message_from_bytes(raw, policy=policy.default)
                assert isinstance(message, EmailMessage)
                self._parsed.append(message)
            return list(self._parsed)

    def count(self) -> int:
        with self._arrived:
            return len(self._raw)

    def message_ids(self, start: int = 0) -> list[str]:
        """The Message-ID header of each message from the ``start``-th on (headers only)."""
        with self._arrived:
            raws = self._raw[start:]
        return [str(_HEADERS.parsebytes(raw).get("Message-ID", "")) for raw in raws]

    def wait_for_more(self, count: int, timeout: float) -> bool:
        """Block until more than ``count`` messages have arrived, or ``timeout`` seconds."""
        with self._arrived:
            return self._arrived.wait_for(lambda: len(self._raw) > count, timeout)


def _verbatim_smtp() -> type:
    """aiosmtpd's SMTP server, with envelope addresses kept as the client sent them: it reads
    them with the e-mail header parser, which decodes RFC 2047 words (``=?utf-8?q?x?=@host``
    became ``x@host``), a different mailbox; SMTP addresses have no encoded words."""
    from aiosmtpd.smtp import SMTP

    class VerbatimSMTP(SMTP):
        def _getaddr(self, arg: str) -> tuple[str | None, str | None]:
            address, rest = super()._getaddr(arg)
            if not address:
                return address, rest  # refused or empty, as aiosmtpd decided
            text = arg.strip()
            if text.startswith("<") and ">" in text:
                return text[1 : text.index(">")], rest
            return text.split(None, 1)[0], rest

    return VerbatimSMTP


@contextmanager
def run_mail_sink(port: int | None = None, *, echo: bool = False) -> Iterator[MailSink]:
    """Listen on 127.0.0.1:``port`` (a free port when ``None``) until the block ends."""
    from aiosmtpd.controller import Controller

    smtp = _verbatim_smtp()

    class VerbatimController(Controller):
        def factory(self) -> Any:
            return smtp(self.handler, **self.SMTP_kwargs)

    sink = MailSink(host="127.0.0.1", port=port or free_port(), echo=echo)
    controller = VerbatimController(sink, hostname=sink.host, port=sink.port)
    controller.start()
    try:
        yield sink
    finally:
        controller.stop()
