"""The function that ``bench.host_sessions_bench`` runs through the local host (the worker
imports it by file name from this folder): it does what the app's processor does with each
message through ``ServiceBusMessageActions`` (read the session state, write it, complete the
message) and releases the session after its last message. ``INVOCATIONS`` records each call."""

from __future__ import annotations

import json
import threading
import time

import azure.functions as func
from azurefunctions.extensions.bindings.servicebus import (
    ServiceBusMessageActions,
    ServiceBusReceivedMessage,
)

from shared.adapters.servicebus_bindings import get_session_state


class Invocations:
    """(session id, start, end) of every invocation, in the order they ended."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: list[tuple[str, float, float]] = []
        self.done = threading.Event()
        self.expected = 0

    def add(self, session_id: str, started: float) -> None:
        with self._lock:
            self.calls.append((session_id, started, time.monotonic()))
            if len(self.calls) >= self.expected:
                self.done.set()

    def reset(self, expected: int) -> None:
        with self._lock:
            self.calls.clear()
            self.expected = expected
            self.done.clear()


INVOCATIONS = Invocations()
app = func.FunctionApp()


@app.service_bus_queue_trigger(
    arg_name="message",
    queue_name="%BENCH_QUEUE%",
    connection="ServiceBusConnection",
    is_sessions_enabled=True,
    auto_complete_messages=False,
)
def step(message: ServiceBusReceivedMessage, message_actions: ServiceBusMessageActions) -> None:
    started = time.monotonic()
    body = message.body
    command = json.loads(body if isinstance(body, bytes) else b"".join(body))
    session_id = str(message.session_id)
    # No public getter yet: the app's adapter calls the Settlement service's GetSessionState.
    get_session_state(message_actions, session_id)
    message_actions.set_session_state(session_id, json.dumps({"step": command["n"]}).encode())
    message_actions.complete(message)
    if command["last"]:
        message_actions.release_session(session_id)
    INVOCATIONS.add(session_id, started)
