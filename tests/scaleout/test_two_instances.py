"""Two instances of the app on one stack, as Azure scales out, and one of them killed with
SIGKILL while orders, an import and a bulk replay are in flight, then started again (as the
platform restarts a host whose process ended): nothing is lost, nothing is charged, mailed or
imported twice, and every dead letter is archived once.

A package of its own: the stack here runs its first instance in the test process, which the
package-wide stack of tests/e2e would hold at the same time."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any, cast

import pytest
from azure.data.tables import TableClient
from azure.servicebus import ServiceBusClient, ServiceBusSubQueue

from localdev.api_client import AppClient
from localdev.host_instances import HostInstance
from localdev.stack import run_stack
from shared.adapters.azure_clients import PAYMENTS_TABLE
from shared.adapters.servicebus_sender import to_service_bus_message
from shared.adapters.simulated_payments import TableSimulatedPaymentGateway
from shared.domain.pipelines import import_message
from tests.e2e.conftest import (
    E2E,
    E2E_SETTINGS,
    InvocationLog,
    e2e_host_json,
    import_rows,
    order,
    wait_for,
)

pytestmark = pytest.mark.e2e

# A killed instance's session locks run out at the broker (the app's queues lock for 60 s)
# before another instance takes its sessions.
AFTER_A_KILL = 240.0


@pytest.fixture(scope="module")
def scaled() -> Iterator[E2E]:
    host_json = e2e_host_json()
    # The shortest listener lease Azure allows, and a quick recovery poll: a restarted
    # instance finds the archive timer's lock held and keeps trying.
    host_json["singleton"] = {
        "listenerLockPeriod": "00:00:15",
        "listenerLockRecoveryPollingInterval": "00:00:01",
    }
    with (
        run_stack(overrides=E2E_SETTINGS, host_json=host_json, instances=2) as stack,
        ServiceBusClient.from_connection_string(stack.servicebus_connection_string) as servicebus,
    ):
        yield E2E(
            stack=stack,
            api=AppClient(stack.api_url, stack.function_key),
            invocations=InvocationLog(),
            payments=TableSimulatedPaymentGateway(
                TableClient.from_connection_string(stack.storage_connection_string, PAYMENTS_TABLE)
            ),
            servicebus=servicebus,
            otlp=cast(Any, None),  # nothing is exported here
        )


def test_an_instance_killed_mid_run_loses_nothing_and_does_nothing_twice(scaled: E2E) -> None:
    e2e = scaled
    (second,) = e2e.stack.more_instances
    import_rows(
        e2e,
        f"catalogue-{uuid.uuid4().hex[:8]}",
        [
            {"sku": "E2E-TEA", "name": "Tea", "price": "10.00", "currency": "EUR"},
            {"sku": "E2E-MUG", "name": "Mug", "price": "5.50", "currency": "EUR"},
        ],
        expect_imported=2,
    )
    # Given: orders that failed while the payment provider was down, archived
    outage_card = f"tok_amex_{uuid.uuid4().hex[:8]}"
    e2e.payments.set_outage([outage_card])
    broken = [submit(e2e, outage_card) for _ in range(3)]
    for job in broken:
        assert e2e.archived_session(job, timeout=60)["reason"] == "PaymentProviderUnavailable"
    e2e.payments.reset_outage()
    executed_before = executions(second)

    # When: a bulk replay of them, new orders (some declined) and an import are in flight
    replay = e2e.api.request(
        "POST",
        "replays",
        body={
            "queue": e2e.purchase_queue,
            "task": "ProcessPayment",
            "reason": "PaymentProviderUnavailable",
        },
    )
    assert replay.status == 202, replay.body
    good = [submit(e2e, "tok_visa_4242") for _ in range(12)]
    declined = [submit(e2e, "tok_declined") for _ in range(3)]
    job = f"import-{uuid.uuid4().hex[:8]}"
    rows = send_import(e2e, job, sessions=2, rows_per_session=20)
    # The bulk request itself is a storage queue message: one that a killed instance held
    # comes back after the 10 minutes its dequeue hid it for, as in Azure. So the kill comes
    # once it has sent the replays, while they run on the purchase queue.
    final = wait_for(
        lambda: (
            (document := e2e.api.request("GET", f"replays/{replay.json()['request_id']}"))
            and document.json()["status"] == "completed"
            and document.json()
        ),
        timeout=60,
        what="the bulk replay sent",
    )
    assert (final["sent"], final["failed"]) == (len(broken), 0), final
    # ... and the second instance is killed while it runs some of them
    wait_for(
        lambda: executions(second) >= executed_before + 3,
        timeout=60,
        what="the second instance running some of the work",
    )
    second.kill()
    wait_for(
        lambda: second.starts == 2 and second.running(),
        timeout=AFTER_A_KILL,
        what="the second instance started again",
    )

    # Then: every order and replay is charged once and mailed once, a receipt whose sending
    # the kill cut short included (its send is repeated as the same request: docs/processor.md,
    # "The receipt e-mail, once")
    copies = {placed: completed_once(e2e, placed) for placed in [*good, *broken]}
    assert set(copies.values()) == {1}, copies
    # every declined order failed once, its dead letters archived once each, nothing charged
    for failed in declined:
        archived = archived_messages(e2e, failed, count=3)
        assert [m["step"] for m in archived] == [3, 4, 5], archived
        assert archived[0]["reason"] == "PaymentDeclined"
        assert e2e.receipt_mails(failed) == []
    # every row is imported or dead-lettered once
    status = wait_for(
        lambda: (
            (s := e2e.api.import_status(job))
            and s["rows_imported"] + s["rows_failed"] == len(rows)
            and s
        ),
        timeout=AFTER_A_KILL,
        what="the import finished",
    )
    bad = [row for row in rows if row["price"] is None]
    assert (status["rows_imported"], status["rows_failed"]) == (len(rows) - len(bad), len(bad))
    for session in (f"{job}-{n:04d}" for n in range(2)):
        archived = archived_messages(e2e, session, count=1)
        assert [m["reason"] for m in archived] == ["InvalidProduct:price"]
    # and no dead letter is left behind to archive again
    wait_for(
        lambda: dead_letters(e2e, e2e.purchase_queue) + dead_letters(e2e, e2e.import_queue) == 0,
        timeout=60,
        what="every dead letter archived",
    )


def submit(e2e: E2E, card: str) -> str:
    return str(e2e.api.submit_order(order(card), idempotency_key=str(uuid.uuid4()))["job_id"])


def send_import(
    e2e: E2E, job: str, *, sessions: int, rows_per_session: int
) -> list[dict[str, Any]]:
    """Rows in ``sessions`` sessions, the way the Spark job sends them; the 7th row of each
    session has no price (dead-lettered)."""
    rows: list[dict[str, Any]] = []
    with e2e.servicebus.get_queue_sender(e2e.import_queue) as sender:
        for n in range(sessions):
            session = f"{job}-{n:04d}"
            batch = [
                {
                    "sku": f"{session}-{step}",
                    "name": "Pot",
                    "price": None if step == 7 else "12.00",
                    "currency": "EUR",
                }
                for step in range(1, rows_per_session + 1)
            ]
            sender.send_messages(
                [
                    to_service_bus_message(
                        session,
                        import_message(job, step, is_last=step == len(batch), row=row),
                        message_id=f"{session}:{step}",
                    )
                    for step, row in enumerate(batch, start=1)
                ]
            )
            rows += batch
    return rows


def completed_once(e2e: E2E, job: str) -> int:
    """Waits for the order to complete, checks it was charged once; returns how many copies
    of its receipt were mailed."""
    wait_for(lambda: e2e.receipt_mail(job), timeout=AFTER_A_KILL, what=f"the receipt of {job}")
    wait_for(
        lambda: e2e.api.request("GET", f"orders/{job}").json()["status"] == "completed",
        timeout=60,
        what=f"order {job} completed",
    )
    assert len(e2e.charges_for(job)) == 1, f"{job}: the card was charged more than once"
    return len(e2e.receipt_mails(job))


def archived_messages(e2e: E2E, session_id: str, *, count: int) -> list[dict[str, Any]]:
    """The session's archived messages, once ``count`` of them are archived."""

    def archived() -> list[dict[str, Any]] | None:
        response = e2e.api.request("GET", f"failed-sessions/{session_id}")
        if response.status != 200:
            return None
        messages = list(response.json()["messages"])
        return messages if len(messages) >= count else None

    return list(wait_for(archived, timeout=AFTER_A_KILL, what=f"{session_id} archived"))


def dead_letters(e2e: E2E, queue: str) -> int:
    with e2e.servicebus.get_queue_receiver(
        queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER
    ) as receiver:
        return len(receiver.peek_messages(max_message_count=50))


def executions(instance: HostInstance) -> int:
    """How many invocations the instance has started, from its log."""
    return instance.log.read_text(errors="replace").count("Executing 'Functions.")
