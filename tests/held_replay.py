"""Holding a replay in flight, for the race tests of the whole stack (tests/e2e, tests/console).

The local host runs the app in the test's own process (``functions_local_host.worker``), so the
app's container is this process's ``shared.bootstrap.container()``. ``replays_held()`` puts a gate
in front of its real resender: a replay that has claimed its session and reaches the send
waits there until the test releases it, then sends through the real resender; any later
replay that reaches the send (none should, while the first holds the session) is noted and
sent at once, so a broken rule shows as a second send, not as a hang. That is the
stated interleaving of a race row: the first request is in flight (its Idempotency-Key record
written, its claim written), the others arrive and are answered, then the first finishes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from shared.bootstrap import container
from shared.service_layer.ports import MessageResender, OutgoingMessage

# A test that fails while a replay is held must not leave the app's request thread stuck.
HOLD_AT_MOST_SECONDS = 60.0


class HeldResender:
    """The app's real resender behind a gate: each ``resend`` is noted; the first waits for
    ``release()`` (at most ``HOLD_AT_MOST_SECONDS``) before it sends."""

    def __init__(self, real: MessageResender) -> None:
        self._real = real
        self._lock = threading.Lock()
        self._released = threading.Event()
        self.reached = threading.Event()
        self.sessions: list[str] = []  # the new session ids that reached the send, in order

    def resend(self, queue_name: str, session_id: str, messages: Sequence[OutgoingMessage]) -> None:
        with self._lock:
            self.sessions.append(session_id)
            first = len(self.sessions) == 1
        self.reached.set()
        if first:
            self._released.wait(HOLD_AT_MOST_SECONDS)
        self._real.resend(queue_name, session_id, messages)

    def wait_reached(self, timeout: float = 30) -> None:
        assert self.reached.wait(timeout), f"no replay reached the send within {timeout} s"

    def release(self) -> None:
        self._released.set()


@contextmanager
def replays_held() -> Iterator[HeldResender]:
    """The app's replays wait at the send until ``release()`` (or the block's end)."""
    app = container()
    real = app.resender
    held = HeldResender(real)
    app.override(resender=held)
    try:
        yield held
    finally:
        held.release()
        app.override(resender=real)
