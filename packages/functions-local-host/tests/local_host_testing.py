"""What the host's tests share: the sample app, the emulator's queues, the fast host.json, and
waiting for what happens in another thread or process."""

from __future__ import annotations

import importlib
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

SAMPLE_APP = Path(__file__).with_name("sample_app.py")


def sample_app() -> ModuleType:
    """The sample app's module, the one the worker runs."""
    folder = str(SAMPLE_APP.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(SAMPLE_APP.stem)


# Queues of the emulator config: one per test that needs a clean one.
LOCK_DURATION_SECONDS = 2
SESSION_QUEUES = (
    "sessions-concurrency",
    "sessions-order",
    "sessions-renewal",
    "sessions-abandon",
    "sessions-autocomplete",
    "sessions-state",
    "sessions-manual",
    "sessions-renew-lock",
    "sessions-no-renewal",
    "sessions-release",
    "sessions-no-release",
    "sessions-release-in-turn",
    "sessions-release-frees-slot",
    "sessions-outlast-drain",
    "sessions-fields",
    "sessions-threads",
    "sessions-batch",
    "sessions-batch-min",
    "sessions-batch-fail",
    "sessions-batch-renew",
    "sessions-batch-no-renewal",
    "sessions-stale-writer",
    "sessions-worker-restart",
    "sessions-http-load",
)
PLAIN_QUEUES = (
    "plain-tasks",
    "plain-traced",
    "plain-concurrency",
    "plain-abandon",
    "plain-defer",
    "plain-renew-lock",
    "plain-no-renewal",
    "plain-manual",
    "plain-renewal-limit",
    "plain-batch",
    "plain-batch-renew",
    "plain-batch-no-renewal",
    "plain-worker-process",
    "plain-timeout",
    "plain-timeout-process",
)

# Queues whose lock outlasts the test's checks, so that only the host lets go of a session;
# plain-manual's lock is long enough for automatic renewal to keep it (renewals come 0.75 x
# the lock before expiry), so only the host stopping renewal lets the message come back.
LONG_LOCK_SECONDS = {
    "sessions-release": 20,
    "sessions-no-release": 20,
    "plain-manual": 6,
    # Long enough that a busy machine cannot make an abandoned message look as if it had been
    # left to its lock (test_abandon_from_the_function_brings_the_message_back_at_once).
    "plain-abandon": 10,
    # Outlasted by the first delivery's invocation, not by the handover that follows.
    "sessions-stale-writer": 4,
}

FAST_HOST_JSON: dict[str, Any] = {
    "version": "2.0",
    "extensions": {
        "serviceBus": {
            "maxConcurrentSessions": 8,
            "sessionIdleTimeout": "00:00:01",
            "maxAutoLockRenewalDuration": "00:01:00",
        },
        "queues": {
            "maxPollingInterval": "00:00:00.5",
            "visibilityTimeout": "00:00:00",
            "maxDequeueCount": 3,
            "batchSize": 4,
        },
    },
}


def emulator_config() -> dict[str, Any]:
    def queue(name: str, *, sessions: bool) -> dict[str, Any]:
        return {
            "Name": name,
            "Properties": {
                "RequiresSession": sessions,
                "LockDuration": f"PT{LONG_LOCK_SECONDS.get(name, LOCK_DURATION_SECONDS)}S",
                "MaxDeliveryCount": 10,
                "DeadLetteringOnMessageExpiration": False,
                "DefaultMessageTimeToLive": "PT1H",
                "RequiresDuplicateDetection": False,
            },
        }

    return {
        "UserConfig": {
            "Namespaces": [
                {
                    "Name": "sbemulatorns",
                    "Queues": [queue(n, sessions=True) for n in SESSION_QUEUES]
                    + [queue(n, sessions=False) for n in PLAIN_QUEUES],
                    "Topics": [],
                }
            ],
            "Logging": {"Type": "Console"},
        }
    }


def wait_for(
    condition: Callable[[], Any], timeout: float = 10.0, what: str = "", interval: float = 0.05
) -> Any:
    """Poll until ``condition()`` is truthy and return it; fail naming ``what`` after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or condition}")
        time.sleep(interval)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
