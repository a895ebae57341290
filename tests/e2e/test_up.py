"""``make up``, Ctrl-C, ``make up`` again: the same ports, the data still there, a quiet stop."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from azure.data.tables import TableClient
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from localdev.api_client import AppClient
from localdev.ports import is_free
from shared.adapters.azure_clients import ORDER_NUMBERS_TABLE
from tests import polling

from .make_up import REPO_ROOT, MakeUp, free_ports

pytestmark = pytest.mark.e2e

QUEUE = "purchase-tasks"
# The dead letters must stay where they are for the test: no archive run while it runs.
SETTINGS = {"DLQ_ARCHIVE_SCHEDULE": "0 0 0 1 1 *"}
_ERROR_LINE = re.compile(r"\b(ERROR|WARNING|CRITICAL|Traceback|Exception|refused)\b", re.I)


@pytest.fixture
def started() -> Iterator[list[MakeUp]]:
    runs: list[MakeUp] = []
    yield runs
    for run in runs:
        run.kill()


def order(job: str) -> dict[str, object]:
    return {
        "customer_email": "ada@example.com",
        "customer_name": f"Ada {job}",
        "card_token": "tok_visa_4242",
        "currency": "EUR",
        "lines": [{"sku": "NOT-IN-THE-EMPTY-CATALOGUE", "quantity": 1}],
    }


def order_number(storage: str, job_id: str) -> str | None:
    table = TableClient.from_connection_string(storage, ORDER_NUMBERS_TABLE)
    rows = list(table.query_entities("JobId eq @job", parameters={"job": job_id}))
    return str(rows[0]["OrderNumber"]) if rows else None


def queue_counts(run: MakeUp) -> dict[str, int]:
    summary = next(line for line in run.lines if line.strip().startswith("Emulator"))
    queues_url = summary.split()[2]
    with urllib.request.urlopen(queues_url, timeout=5) as response:
        return dict(json.load(response)[QUEUE])


def stop_lines(run: MakeUp) -> list[str]:
    """What make up printed from Ctrl-C on."""
    start = next(i for i, line in enumerate(run.lines) if line.startswith("Stopping"))
    return run.lines[start:]


def test_a_restart_keeps_the_ports_and_the_data_and_stops_quietly(
    tmp_path: Path, started: list[MakeUp]
) -> None:
    ports = free_ports()
    first = MakeUp(tmp_path / ".data", ports, env=SETTINGS)
    started.append(first)
    first.wait_ready()
    before = first.exports()
    api = AppClient(before["API"], before["KEY"])

    # An order that gets its number (step 1), then fails at CalculateTotal (empty catalogue):
    # its number is in Table Storage and its later steps wait in the dead-letter queue.
    job = uuid.uuid4().hex[:8]
    accepted = api.submit_order(order(job), idempotency_key=f"restart-{job}")
    storage = before["AzureWebJobsStorage"]
    number = polling.wait_for(
        lambda: order_number(storage, accepted["job_id"]), 60, "the order's number", 0.5
    )
    # And a message that stays queued: scheduled for an hour from now.
    with (
        ServiceBusClient.from_connection_string(before["ServiceBusConnection"]) as client,
        client.get_queue_sender(QUEUE) as sender,
    ):
        sender.schedule_messages(
            ServiceBusMessage(b"{}", session_id=f"kept-{job}", message_id=f"kept-{job}"),
            datetime.now(UTC) + timedelta(hours=1),
        )
    polling.wait_for(lambda: queue_counts(first)["dead_lettered"] >= 4, 60, "dead letters", 0.5)
    counts = queue_counts(first)
    assert counts["scheduled"] == 1, counts

    assert first.interrupt() == 0, first.output
    assert stop_lines(first)[-1].startswith("Stopped."), first.output
    noisy = [line for line in stop_lines(first) if _ERROR_LINE.search(line)]
    assert not noisy, "\n".join(noisy)
    # The HTTP port has connections in TIME_WAIT now; it counts as free all the same.
    assert is_free(ports.http)

    second = MakeUp(tmp_path / ".data", ports, env=SETTINGS)
    started.append(second)
    second.wait_ready()
    assert second.exports() == before, "the ports or the key changed across the restart"
    assert "is held by" not in second.output
    assert order_number(storage, accepted["job_id"]) == number
    assert queue_counts(second) == counts
    again = api.submit_order(order(job + "-2"), idempotency_key=f"restart-{job}-2")
    next_number = polling.wait_for(
        lambda: order_number(storage, again["job_id"]), 60, "the second order's number", 0.5
    )
    assert int(next_number.removeprefix("ORD-")) == int(number.removeprefix("ORD-")) + 1

    assert second.interrupt() == 0, second.output
    noisy = [line for line in stop_lines(second) if _ERROR_LINE.search(line)]
    assert not noisy, "\n".join(noisy)


def test_a_port_held_by_another_process_is_moved_and_the_holder_named(
    tmp_path: Path, started: list[MakeUp]
) -> None:
    ports = free_ports()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", ports.smtp))
        holder.listen()
        run = MakeUp(tmp_path / ".data", ports)
        started.append(run)
        run.wait_ready()
        assert f"Port {ports.smtp} (SMTP) is held by pid {os.getpid()} (" in run.output
        smtp = next(line for line in run.lines if line.strip().startswith("SMTP sink"))
        assert f"127.0.0.1:{ports.smtp} " not in smtp, smtp
        assert run.interrupt() == 0


def test_a_second_make_up_on_the_same_data_is_refused_and_reset_waits_for_the_stop(
    tmp_path: Path, started: list[MakeUp]
) -> None:
    first = MakeUp(tmp_path / ".data", free_ports())
    started.append(first)
    first.wait_ready()
    second = MakeUp(tmp_path / ".data", free_ports())
    started.append(second)
    polling.wait_for(lambda: "is running on" in second.output, 60, "the refusal", 0.2)

    reset = [sys.executable, "-m", "localdev.up", "--reset", "--data-dir", str(tmp_path / ".data")]
    refused = subprocess.run(reset, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    assert refused.returncode == 1 and "is running on" in refused.stderr
    assert (tmp_path / ".data" / "azurite").is_dir()

    assert first.interrupt() == 0
    done = subprocess.run(reset, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / ".data").exists()
