"""The real app (``function_app.py``) on the local host, as the stack runs it, over one Service
Bus emulator per test session holding the app's two session queues."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from servicebus_emulator.testing import run_emulator

# The real app's queues, as its PURCHASE_ and IMPORT_QUEUE_NAME.
APP_PURCHASE_QUEUE = "app-purchase-tasks"
APP_IMPORT_QUEUE = "app-product-import-tasks"
APP_LOCK_SECONDS = 60  # the app's own lock duration (infra/local/config.json)


def emulator_config() -> dict[str, Any]:
    def queue(name: str) -> dict[str, Any]:
        return {
            "Name": name,
            "Properties": {
                "RequiresSession": True,
                "LockDuration": f"PT{APP_LOCK_SECONDS}S",
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
                    "Queues": [queue(APP_PURCHASE_QUEUE), queue(APP_IMPORT_QUEUE)],
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
