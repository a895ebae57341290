"""The Python SDK's own samples for topics and subscriptions, run unmodified against the
emulator with nothing but their environment (the connection string, the topic and subscription
names), sync and async.

They come from the azure-servicebus 7.11.4 sdist on PyPI, the last release whose samples take a
connection string (later ones sign in with DefaultAzureCredential); ``make setup`` unpacks them
into the venv. They run with the SDK installed here. The samples that manage rules and entities
(topic_subscription_with_rule_operations, mgmt_*) build the administration client from the
connection string alone, which reaches no emulator (Microsoft's documents an override for it,
covered in test_administration.py), so they are not run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

SAMPLES = Path(sys.prefix) / "servicebus-samples-7.11.4" / "samples"
TOPIC, SUBSCRIPTION = "samples-topic", "samples-subscription"
PATH = f"{TOPIC}/Subscriptions/{SUBSCRIPTION}"


def run_sample(emulator: Any, flavour: str, name: str) -> str:
    folder = SAMPLES / f"{flavour}_samples"
    if not folder.is_dir():
        pytest.fail(f"the azure-servicebus samples are not in {SAMPLES}: run make setup")
    suffix = "_async" if flavour == "async" else ""
    env = {
        **os.environ,
        "SERVICEBUS_CONNECTION_STR": emulator.connection_string,
        "SERVICEBUS_TOPIC_NAME": TOPIC,
        "SERVICEBUS_SUBSCRIPTION_NAME": SUBSCRIPTION,
    }
    run = subprocess.run(
        [sys.executable, str(folder / f"{name}{suffix}.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, f"{name}{suffix}.py failed:\n{run.stdout}\n{run.stderr[-3000:]}"
    return run.stdout


# What send_topic sends: one message, a list of 10 (the sync sample only), a batch of 10.
SENT = {"sync": 21, "async": 11}


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_the_topic_and_subscription_samples_run(emulator: Any, flavour: str) -> None:
    drained = emulator.counts()[PATH]["active"]
    assert drained == 0, "an earlier run left messages in the samples' subscription"

    assert "Send message is done." in run_sample(emulator, flavour, "send_topic")
    assert emulator.counts()[PATH]["active"] == SENT[flavour]

    received = run_sample(emulator, flavour, "receive_subscription").splitlines()
    printed = [line for line in received if line and line != "Receive is done."]
    assert len(printed) == 10  # one receive of at most 10: each printed, then completed
    assert emulator.counts()[PATH]["active"] == SENT[flavour] - 10

    scheduled = run_sample(emulator, flavour, "schedule_topic_messages_and_cancellation")
    assert "All scheduled messages are cancelled." in scheduled
    assert emulator.counts()[TOPIC]["scheduled"] == 0

    while emulator.counts()[PATH]["active"]:  # leave the subscription empty for the next run
        run_sample(emulator, flavour, "receive_subscription")
