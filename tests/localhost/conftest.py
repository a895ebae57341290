"""One Azurite and one Service Bus emulator per test session; each test runs its own
``LocalHost`` over ``sample_app.py`` with only the functions it tests.

The worker imports the app by its file name from its folder (the script root), as the top-level
module ``sample_app``; the tests read what the functions saw from that same module."""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from localdev.host import LocalHost
from servicebus_emulator.testing import run_emulator

logging.getLogger("localdev.host").setLevel(logging.INFO)

SAMPLE_APP = Path(__file__).with_name("sample_app.py")


def sample_app() -> ModuleType:
    """The sample app's module, the one the worker runs."""
    folder = str(SAMPLE_APP.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(SAMPLE_APP.stem)


# Queues of the emulator config: one per test that needs a clean one.
LOCK_DURATION_SECONDS = 2
# The real app's queues (test_app_sessions.py), as its PURCHASE_ and IMPORT_QUEUE_NAME.
APP_PURCHASE_QUEUE = "app-purchase-tasks"
APP_IMPORT_QUEUE = "app-product-import-tasks"
SESSION_QUEUES = (
    APP_PURCHASE_QUEUE,
    APP_IMPORT_QUEUE,
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
    "plain-batch-renewal",
    "plain-worker-process",
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
    APP_PURCHASE_QUEUE: 60,  # the app's own lock duration (infra/local/config.json)
    APP_IMPORT_QUEUE: 60,
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


@pytest.fixture(scope="session")
def servicebus_connection_string() -> Iterator[str]:
    with run_emulator(emulator_config()) as emulator:
        yield emulator.connection_string


@pytest.fixture
def seen() -> Iterator[Any]:
    record = sample_app().SEEN
    record.clear()
    yield record
    record.clear()


@pytest.fixture
def run_host() -> Iterator[Callable[..., LocalHost]]:
    """Start a LocalHost over sample_app with the given functions; stopped after the test."""
    hosts: list[LocalHost] = []

    def start(
        functions: list[str],
        settings: Mapping[str, str] | None = None,
        host_json: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> LocalHost:
        host = LocalHost(
            SAMPLE_APP,
            dict(settings or {}),
            dict(host_json or FAST_HOST_JSON),
            functions=functions,
            drain_timeout=10,
            **options,
        )
        hosts.append(host.start())
        return host

    yield start
    for host in hosts:
        host.stop()
