"""A deploy as Azure runs it: the release deployed now (tests/upgrade/previous-release) and
this checkout side by side on one local stack, the products' move run in the middle, orders,
imports and replays through both. Every order is charged and mailed once at the newest
prices, every import row counts once, and each release reads what the other wrote: messages,
session state, failure records and archived sessions, Idempotency-Key records, progress.

Both releases' HTTP functions answer throughout (this checkout's in the test process, the
previous release's in an instance of its own). Their triggers run in one instance at a time,
so that which release reads what the other wrote is known, not left to chance:

1. Before the deploy, the previous release's triggers: it runs the orders both APIs take,
   archives the failed ones, imports a catalogue and the first rows of an import session.
2. The deploy, this release's triggers (the previous one's stopped, draining): the rest of
   that session's rows on the state the previous release left, the products' move while
   another import runs, replays of what the previous release archived, orders through both.
3. This release's instance scaled in, the previous release's triggers again (a deploy's old
   instances still run while it drains): the same the other way round.

A package of its own: the stack here runs its first instance in the test process, which the
package-wide stack of tests/e2e would hold at the same time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from functools import partial
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient

from localdev.api_client import AppClient
from localdev.host_instances import HostInstance
from localdev.ports import free_port
from localdev.releases import Release, previous_release
from localdev.stack import run_stack
from localdev.stack_layout import APP_SCRIPT, REPO_ROOT, SETTINGS_FILE
from shared.adapters.azure_clients import PAYMENTS_TABLE, PRODUCTS_TABLE
from shared.adapters.simulated_payments import TableSimulatedPaymentGateway
from tests.e2e.conftest import E2E_SETTINGS, e2e_host_json, wait_for

from .deploy_steps import (
    SHIPPING,
    TAX,
    Deploy,
    archived,
    dead_letters,
    import_and_wait,
    legacy_product,
    ran,
    receipts,
    replay,
    send_import,
    send_rows,
    status,
    submit,
    total,
    wait_completed,
    wait_counted,
    wait_imported,
)

pytestmark = pytest.mark.e2e

SETTINGS = {
    **E2E_SETTINGS,
    "ORDER_TAX_RATE": str(TAX),
    "ORDER_SHIPPING_FEE": str(SHIPPING),
    # The emulator has nothing in flight: an archive run need not wait 2 s per queue for
    # stragglers (an instance's drain waits for the run in flight).
    "DLQ_ARCHIVE_RECEIVE_WAIT_SECONDS": "0.5",
    # As docs/deploy.md's upgrade procedure says for a deploy over a release that reads an
    # order's status from its step rows (the previous release ignores the setting)
    "ORDER_STEP_ROWS": "true",
}
# Products of the catalog's layout before its partitions (one partition per SKU), which the
# deploy's move takes to their partitions: one kept as it is, one imported again before the
# move, one imported again while it runs.
LEGACY = {"OLD-KEPT": "2.00", "OLD-REIMPORTED": "3.10", "OLD-RACE": "1.00"}


@pytest.fixture(scope="module")
def deploy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deploy]:
    folder = tmp_path_factory.mktemp("upgrade")
    logs = folder / "logs"
    logs.mkdir()
    # A stopped instance's timer lock passes to the other within seconds, as in scaleout
    singleton = {
        "listenerLockPeriod": "00:00:15",
        "listenerLockRecoveryPollingInterval": "00:00:01",
    }
    host_json = {**e2e_host_json(), "singleton": singleton}
    new_http, new_triggers = functions_of(REPO_ROOT, sys.executable)
    with (
        previous_release(folder) as previous,
        run_stack(
            overrides=SETTINGS, host_json=host_json, first_instance_functions=new_http
        ) as stack,
        ServiceBusClient.from_connection_string(stack.servicebus_connection_string) as bus,
    ):
        old_http, old_triggers = functions_of(previous.tree, previous.python)
        old_host_json = {**e2e_host_json(previous.host_json), "singleton": singleton}
        environ = {**os.environ, **stack.settings}

        def instance(number: int, release: Release | None, functions: list[str]) -> HostInstance:
            path = logs / f"host-{number}.json"
            path.write_text(json.dumps(old_host_json if release else host_json))
            return HostInstance(
                number, environ=environ, host_json=path, log=logs / f"host-{number}.log",
                settings_file=SETTINGS_FILE, app=release.app if release else APP_SCRIPT,
                python=release.python if release else sys.executable, functions=functions,
                http_port=free_port(),
            )  # fmt: skip

        deploy = Deploy(
            stack=stack,
            previous=previous,
            new_api=AppClient(stack.api_url, stack.function_key),
            old_http=instance(2, previous, old_http),
            old=instance(3, previous, old_triggers),
            new=instance(4, None, new_triggers),
            servicebus=bus,
        )
        try:
            deploy.old_http.start()
            yield deploy
        finally:
            with ThreadPoolExecutor() as stopping:  # each drains in its own time
                list(stopping.map(HostInstance.stop, (deploy.new, deploy.old, deploy.old_http)))


def functions_of(tree: Path, python: str) -> tuple[list[str], list[str]]:
    """A checkout's HTTP functions and its other functions (its triggers), by name, indexed in
    a process of its own (an app is indexed once per process)."""
    script = (
        "import json, function_app\n"
        "print(json.dumps({f.get_function_name(): [b['type'] for b in\n"
        "    json.loads(f.get_function_json())['bindings']]\n"
        "    for f in function_app.app.get_functions()}))"
    )
    done = subprocess.run(
        [python, "-c", script], cwd=tree, capture_output=True, text=True, check=True
    )
    bindings: dict[str, list[str]] = json.loads(done.stdout.splitlines()[-1])
    http = [name for name, types in bindings.items() if "httpTrigger" in types]
    return http, [name for name in bindings if name not in http]


def test_the_previous_release_and_this_one_side_by_side(deploy: Deploy) -> None:
    started = time.monotonic()
    old, new = deploy.old_api, deploy.new_api
    products = deploy.table(PRODUCTS_TABLE)
    for sku, price in LEGACY.items():
        products.upsert_entity(legacy_product(sku, price))
    orders: dict[str, Decimal] = {}  # job id -> the total it must be charged
    at = {"TEA": "10.00", "OLD-KEPT": "2.00", "OLD-REIMPORTED": "4.20", "OLD-RACE": "1.50",
          "NEW-TEA": "7.00", "NEW-MUG": "5.50"}  # fmt: skip

    def order(api: AppClient, sku: str, n: int, *, key: str | None = None) -> str:
        job = submit(api, (sku, n), key=key)
        orders[job] = total(Decimal(at[sku]) * n)
        return job

    # 1. Before the deploy: the previous release's triggers
    deploy.old.start()
    import_and_wait(deploy, old, "catalogue-1", {"TEA": "10.00", "OLD-REIMPORTED": "4.20"})
    key_k = f"k-{uuid.uuid4()}"
    done_1 = [
        order(new, "TEA", 2),  # taken by this release, run by the previous one
        order(old, "OLD-KEPT", 1),  # read from the layout before the partitions
        order(old, "TEA", 1, key=key_k),
    ]
    keyed_k = done_1[-1]
    failed_1 = [order(old, "NEW-TEA", 1), order(new, "NEW-TEA", 2)]  # not imported yet
    send_rows(deploy, "handoff-1", [1, 2])
    for job in done_1:
        wait_completed(old, job)
    for job in failed_1:
        archived(old, job)
    wait_counted(old, "handoff-1", 2)

    # 2. The deploy: this release's triggers start, the previous release's stop (draining)
    deploy.new.start()
    deploy.old.stop()
    send_rows(deploy, "handoff-1", [3, 4])
    send_import(deploy, "catalogue-2", {"OLD-RACE": "1.50", "NEW-TEA": "7.00"})
    move = subprocess.Popen(
        [sys.executable, "-m", "shared.bootstrap.move_products"], cwd=REPO_ROOT,
        env={**os.environ, **deploy.stack.settings}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    moved = move.communicate(timeout=120)[0]
    assert move.returncode == 0, moved
    wait_imported(new, "catalogue-2")
    replay(new, failed_1[0])  # archived by the previous release
    replay(old, failed_1[1])
    assert submit(new, ("TEA", 1), key=key_k) == keyed_k
    key_l = f"k-{uuid.uuid4()}"
    done_2 = [order(old, "TEA", 1), order(new, "OLD-REIMPORTED", 1, key=key_l)]
    keyed_l = done_2[-1]
    failed_2 = [order(new, "NEW-MUG", 2), order(old, "NEW-MUG", 1)]
    send_rows(deploy, "handoff-2", [1, 2])
    for job in [*done_2, *failed_1]:
        wait_completed(new, job)
    for job in failed_2:
        archived(new, job)
    wait_imported(new, "handoff-1")
    wait_counted(new, "handoff-2", 2)

    # 3. This release's instance scaled in: the previous release's triggers take over again
    deploy.old.start()
    deploy.new.stop()
    send_rows(deploy, "handoff-2", [3, 4])
    import_and_wait(deploy, old, "catalogue-3", {"NEW-MUG": "5.50"})
    replay(old, failed_2[0])  # archived by this release
    replay(new, failed_2[1])
    assert submit(old, ("OLD-REIMPORTED", 1), key=key_l) == keyed_l
    done_3 = [order(new, "OLD-REIMPORTED", 1), order(new, "OLD-KEPT", 1), order(old, "OLD-RACE", 2)]
    wait_imported(old, "handoff-2")

    # Then: every order completed, charged and mailed once, at the newest prices
    charges = TableSimulatedPaymentGateway(deploy.table(PAYMENTS_TABLE))
    for job, expected in orders.items():
        wait_completed(old, job)
        assert status(new, job)["status"] == "completed"
        charged = [
            c.amount for c in charges.list_charges() if c.idempotency_key == f"{job}:payment"
        ]
        assert charged == [expected], job
        wait_for(partial(receipts, deploy, job), timeout=30, what=f"{job}'s receipt")
    assert len(orders) == len(done_1) + len(failed_1) + len(done_2) + len(failed_2) + len(done_3)
    assert {job: len(receipts(deploy, job)) for job in orders} == dict.fromkeys(orders, 1)
    # ... each import row counted once, as both releases count it, each handed-over session
    # run by both
    for job, rows in (("catalogue-1", 3), ("catalogue-2", 3), ("catalogue-3", 2),
                      ("handoff-1", 4), ("handoff-2", 4)):  # fmt: skip
        for api in (old, new):
            counted = api.import_status(job)
            assert counted is not None
            assert (counted["rows_imported"], counted["rows_failed"]) == (rows - 1, 1), counted
            assert (counted["status"], counted["rows_pending"]) == ("completed", 0), counted
    assert ran(deploy.old, "handoff-1", 2) and ran(deploy.new, "handoff-1", 3)
    assert ran(deploy.new, "handoff-2", 2) and ran(deploy.old, "handoff-2", 3)
    # ... the newest price of each product kept, none left in the layout before
    assert "skipped 0" in moved, moved
    assert [e["Sku"] for e in products.query_entities("RowKey eq 'product'")] == []
    assert {e["Sku"]: e["Price"] for e in products.list_entities() if e["Sku"] in at} == at
    # ... and no dead letter left unarchived
    wait_for(lambda: dead_letters(deploy) == 0, timeout=60, what="every dead letter archived")
    print(f"two releases side by side: {time.monotonic() - started:.0f} s")
