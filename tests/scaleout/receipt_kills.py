"""What the receipt kill tests share: a stack whose app instances hold a receipt after its
send and before anything records it when the test arms them (FAULT_HOLD_AFTER_RECEIPT_SENT,
shared/bootstrap/faults.py), the arming, the held receipts, and the checks that every order
was charged once and mailed once."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

from azure.data.tables import TableClient
from azure.servicebus import ServiceBusClient
from azure.servicebus.management import ServiceBusAdministrationClient

from localdev.api_client import AppClient
from localdev.host_instances import HostInstance
from localdev.stack import run_stack
from localdev.stack_layout import REPO_ROOT
from shared.adapters.azure_clients import PAYMENTS_TABLE
from shared.adapters.simulated_payments import TableSimulatedPaymentGateway
from shared.adapters.table_receipt_emails import RECEIPT_EMAILS_TABLE, TableReceiptEmails
from shared.domain.receipt_emails import ReceiptEmail
from tests.e2e.conftest import (
    E2E,
    E2E_SETTINGS,
    InvocationLog,
    e2e_host_json,
    import_rows,
    order,
    wait_for,
)

# A killed instance's session lock runs out at the broker before another instance, or the
# same one started again, takes the session: the purchase queue's locks are shortened to this
# for the test (the app renews its locks, so a live invocation keeps its session).
LOCK_SECONDS = 10
AFTER_A_KILL = 120.0


@dataclass(frozen=True)
class Held:
    pid: int
    job_id: str


@dataclass(frozen=True)
class KillStack:
    e2e: E2E
    faults: Path

    def arm(self, instance: HostInstance) -> None:
        """From now on ``instance`` holds each receipt after its send (until it is killed)."""
        assert instance.pid is not None
        (self.faults / f"arm-{instance.pid}").touch()

    def held(self) -> list[Held]:
        """The receipts held so far: sent, and nothing recorded of it."""
        found = []
        for marker in self.faults.glob("held-*"):
            text = marker.read_text().strip()
            if text:  # written right after the exclusive create
                pid, job_id = text.split(" ", 1)
                found.append(Held(int(pid), job_id))
        return found

    def submit(self, count: int) -> list[str]:
        return [
            str(self.e2e.api.submit_order(order(), idempotency_key=str(uuid.uuid4()))["job_id"])
            for _ in range(count)
        ]

    def submit_until_held(self, per_wave: int, *, waves: int = 3, wait: float = 20) -> list[str]:
        """Orders, ``per_wave`` at a time, until an armed instance holds a receipt; their ids."""
        jobs: list[str] = []
        for _ in range(waves):
            jobs += self.submit(per_wave)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if self.held():
                    return jobs
                time.sleep(0.2)
        raise AssertionError(f"no armed instance held a receipt of {len(jobs)} orders")

    def receipt_record(self, job_id: str) -> ReceiptEmail | None:
        return TableReceiptEmails(self.e2e.table(RECEIPT_EMAILS_TABLE)).find(job_id)

    def completed_and_mailed_once(self, job_id: str) -> None:
        """The order completes, charged once, its receipt mailed once."""
        e2e = self.e2e
        wait_for(
            lambda: e2e.api.request("GET", f"orders/{job_id}").json()["status"] == "completed",
            timeout=AFTER_A_KILL,
            what=f"order {job_id} completed",
        )
        assert len(e2e.charges_for(job_id)) == 1, f"{job_id}: charged more than once"
        assert len(e2e.receipt_mails(job_id)) == 1, f"{job_id}: mailed {e2e.receipt_mails(job_id)}"


def http_functions() -> list[str]:
    """The app's HTTP functions, read by indexing function_app.py in a process of its own (an
    app indexes once per process, and the stack's first instance indexes it in this one)."""
    script = (
        "import json, function_app\n"
        "print(json.dumps([str(f.get_function_name()) for f in function_app.app.get_functions()"
        " if json.loads(f.get_function_json())['bindings'][0]['type'] == 'httpTrigger']))"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    return cast(list[str], json.loads(run.stdout.strip().splitlines()[-1]))


@contextmanager
def kill_stack(tmp: Path, *, instances: int, api_only_here: bool) -> Iterator[KillStack]:
    """The local stack with ``instances`` instances of the app (the first in this process,
    running only the API when ``api_only_here``), the fault point's folder set, the catalogue
    the orders need imported, and the purchase queue's locks shortened."""
    faults = tmp / "faults"
    faults.mkdir()
    settings = {**E2E_SETTINGS, "FAULT_HOLD_AFTER_RECEIPT_SENT": str(faults)}
    with (
        run_stack(
            overrides=settings,
            host_json=e2e_host_json(),
            instances=instances,
            first_instance_functions=http_functions() if api_only_here else None,
        ) as stack,
        ServiceBusClient.from_connection_string(stack.servicebus_connection_string) as servicebus,
    ):
        e2e = E2E(
            stack=stack,
            api=AppClient(stack.api_url, stack.function_key),
            invocations=InvocationLog(),
            payments=TableSimulatedPaymentGateway(
                TableClient.from_connection_string(stack.storage_connection_string, PAYMENTS_TABLE)
            ),
            servicebus=servicebus,
            otlp=cast(Any, None),  # nothing is exported here
        )
        shorten_locks(stack.emulator, e2e.purchase_queue, LOCK_SECONDS)
        import_rows(
            e2e,
            f"catalogue-{uuid.uuid4().hex[:8]}",
            [{"sku": "E2E-TEA", "name": "Tea", "price": "10.00", "currency": "EUR"}],
            expect_imported=1,
        )
        yield KillStack(e2e, faults)


def shorten_locks(emulator: Any, queue: str, seconds: int) -> None:
    """The queue's lock duration, through the management API as an operator would change it
    (the override Microsoft's emulator documentation gives for Python's client)."""
    admin = ServiceBusAdministrationClient.from_connection_string(
        f"Endpoint=sb://127.0.0.1:{emulator.http_port};SharedAccessKeyName="
        "RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"
    )
    admin._impl._client._base_url = emulator.http_url
    with admin:
        properties = admin.get_queue(queue)
        properties.lock_duration = timedelta(seconds=seconds)
        admin.update_queue(properties)
        assert admin.get_queue(queue).lock_duration == timedelta(seconds=seconds)
