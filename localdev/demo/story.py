"""The demo's story, step by step, told on stdout; every claim it makes is checked."""

from __future__ import annotations

import re
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from azure.data.tables import TableClient
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from localdev.api_client import AppClient
from localdev.stack import LocalStack
from shared.adapters.azure_clients import (
    DEAD_LETTERS_TABLE,
    PAYMENTS_TABLE,
)
from shared.adapters.simulated_payments import TableSimulatedPaymentGateway
from shared.domain.archive import SESSION_FAILED

from . import catalogue
from .scenario import (
    CATALOGUE,
    CATALOGUE_INVALID,
    CATALOGUE_REJECTED,
    CATALOGUE_ROWS,
    COMPLETE,
    MALFORMED_BODY,
    OUTAGE_CARDS,
    PlannedOrder,
    expected_failures,
    planned_orders,
)

PROGRESS_EVERY = 3.0  # seconds between two progress lines
IMPORT_SESSIONS = 3
_RECEIPT_SUBJECT = re.compile(r"order (\S+)$")
_CHARGED = re.compile(r"We charged (\S+) ([A-Z]{3})")


class DemoAborted(RuntimeError):
    """The story cannot go on (a service did not start, the Spark job failed...)."""


@dataclass(frozen=True)
class Receipt:
    job_id: str
    order_number: str
    total: str
    currency: str


@dataclass
class Story:
    stack: LocalStack
    log_file: Path
    deadline: float
    started: float = field(default_factory=time.monotonic)
    checks: list[tuple[str, bool]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.api = AppClient(self.stack.api_url, self.stack.function_key)
        self.run_id = uuid.uuid4().hex[:8]
        self.purchase_queue = self.stack.settings["PURCHASE_QUEUE_NAME"]
        self.import_queue = self.stack.settings["IMPORT_QUEUE_NAME"]
        connection = self.stack.storage_connection_string
        self.payments = TableSimulatedPaymentGateway(
            TableClient.from_connection_string(connection, PAYMENTS_TABLE)
        )
        self.dead_letter_rows = TableClient.from_connection_string(connection, DEAD_LETTERS_TABLE)

    # -- telling ------------------------------------------------------------------------------

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def say(self, text: str = "") -> None:
        print(text, flush=True)

    def step(self, title: str) -> None:
        self.say(f"\n== {title}  [{self.elapsed():.0f} s]")

    def check(self, claim: str, ok: bool) -> bool:
        self.checks.append((claim, ok))
        self.say(f"   [{'ok' if ok else 'FAILED'}] {claim}")
        return ok

    def wait(self, done: Callable[[], bool], progress: Callable[[], str], timeout: float) -> bool:
        """Poll ``done`` every half second, print ``progress()`` every few seconds; False when
        ``timeout`` (or the demo's deadline) passes first."""
        until = min(self.deadline, time.monotonic() + timeout)
        next_line = time.monotonic() + PROGRESS_EVERY
        while True:
            if done():
                self.say(f"   [{self.elapsed():5.1f} s] {progress()}")
                return True
            now = time.monotonic()
            if now >= until:
                self.say(f"   [{self.elapsed():5.1f} s] {progress()}  (gave up waiting)")
                return False
            if now >= next_line:
                self.say(f"   [{self.elapsed():5.1f} s] {progress()}")
                next_line = now + PROGRESS_EVERY
            time.sleep(0.5)

    # -- what the system shows ----------------------------------------------------------------

    def queue_counts(self, queue: str) -> dict[str, int]:
        counts = self.stack.emulator.counts().get(queue, {})
        return {
            name: int(counts.get(name, 0))
            for name in ("active", "scheduled", "deferred", "dead_lettered")
        }

    def messages_left(self, queue: str) -> int:
        counts = self.queue_counts(queue)
        return counts["active"] + counts["scheduled"] + counts["deferred"]

    def dead_letters_waiting(self) -> int:
        """Dead letters of both pipelines that the archive timer has not moved yet."""
        return sum(
            self.queue_counts(queue)["dead_lettered"]
            for queue in (self.purchase_queue, self.import_queue)
        )

    def receipts(self) -> dict[str, Receipt]:
        """Receipts mailed so far, by job id (the Message-ID is ``<job id>.receipt@...``)."""
        found = {}
        for mail in self.stack.mail.received():
            found_receipt = _receipt_of(mail)
            if found_receipt:
                found[found_receipt.job_id] = found_receipt
        return found

    def failed_sessions(self, queue: str) -> list[dict[str, Any]]:
        return self.api.failed_sessions(queue=queue, status="any")

    # -- the story ----------------------------------------------------------------------------

    def run(self) -> bool:
        self.import_catalogue()
        orders, sessions = self.submit_orders()
        self.process(orders, sessions)
        self.report(orders, sessions)
        self.replay_outage(orders, sessions)
        failed = [claim for claim, ok in self.checks if not ok]
        if failed:
            self.say(f"\n== {len(failed)} of {len(self.checks)} checks FAILED:")
            for claim in failed:
                self.say(f"   - {claim}")
            return False
        self.say(
            f"\n== The story came out as expected: {len(self.checks)} checks passed in "
            f"{self.elapsed():.0f} s."
        )
        return True

    def import_catalogue(self) -> None:
        job_id = f"demo-catalogue-{self.run_id}"
        why_not = catalogue.spark_unavailable()
        relative = CATALOGUE.relative_to(CATALOGUE.parents[2])
        if why_not is None:
            self.step(f"Importing the product catalogue {relative} with the Spark job (local[2])")
            try:
                run = catalogue.import_with_spark(
                    CATALOGUE,
                    job_id=job_id,
                    queue=self.import_queue,
                    sessions=IMPORT_SESSIONS,
                    servicebus_connection_string=self.stack.servicebus_connection_string,
                    storage_connection_string=self.stack.storage_connection_string,
                    log_file=self.log_file,
                    timeout=max(30.0, self.deadline - time.monotonic()),
                )
            except RuntimeError as error:
                raise DemoAborted(str(error)) from error
        else:
            self.step(f"Importing the product catalogue {relative} through the import queue")
            self.say(
                f"   Local Spark cannot run here: {why_not}. The demo sends the rows to the "
                "import queue itself, the way the Spark job would (install a JDK 17 to see "
                "the Spark job do it)."
            )
            run = catalogue.import_through_queue(
                CATALOGUE,
                job_id=job_id,
                queue=self.import_queue,
                sessions=IMPORT_SESSIONS,
                servicebus_connection_string=self.stack.servicebus_connection_string,
            )
        self.say(
            f"   {run.engine}: {run.rows_read} rows read, {run.rows_rejected} rejected as "
            f"unreadable, {run.rows_sent} sent in {run.sessions} sessions"
        )
        self.check(
            f"the job read {CATALOGUE_ROWS} rows, rejected {CATALOGUE_REJECTED} and sent the rest",
            (run.rows_read, run.rows_rejected, run.rows_sent)
            == (CATALOGUE_ROWS, CATALOGUE_REJECTED, CATALOGUE_ROWS - CATALOGUE_REJECTED),
        )

        def status() -> dict[str, Any]:
            return self.api.import_status(job_id) or {"rows_imported": 0, "rows_failed": 0}

        def progress() -> str:
            now = status()
            return (
                f"GET /api/imports/{job_id}: {now['rows_imported']} rows imported, "
                f"{now['rows_failed']} dead-lettered, "
                f"{self.messages_left(self.import_queue)} messages left"
            )

        def done() -> bool:
            now = status()
            return (
                now["rows_imported"] + now["rows_failed"] >= run.rows_sent
                and self.messages_left(self.import_queue) == 0
            )

        self.wait(done, progress, timeout=60)
        invalid = sum(CATALOGUE_INVALID.values())
        final = status()
        self.check(
            f"{run.rows_sent - invalid} products imported and {invalid} bad rows dead-lettered: "
            "the import went on past them",
            (final["rows_imported"], final["rows_failed"]) == (run.rows_sent - invalid, invalid),
        )

    def submit_orders(self) -> tuple[list[PlannedOrder], dict[str, str]]:
        """Returns the orders and session id -> order name (plus the malformed message's)."""
        orders = planned_orders()
        self.step(
            f"Submitting {len(orders)} orders through POST /api/orders, and a malformed message "
            "straight to the queue"
        )
        self.payments.set_outage(OUTAGE_CARDS)
        self.say(
            f"   The payment provider is down for {len(OUTAGE_CARDS)} Amex cards "
            f"({', '.join(OUTAGE_CARDS)}): simulated outage switched on."
        )
        # Customers order at the same time: 6 requests in flight, as from a shop's web servers.
        with ThreadPoolExecutor(max_workers=6) as pool:
            accepted = list(
                pool.map(
                    lambda planned: self.api.submit_order(
                        planned.order, idempotency_key=f"demo-{self.run_id}-{planned.name}"
                    ),
                    orders,
                )
            )
        sessions = {
            answer["session_id"]: planned.name
            for answer, planned in zip(accepted, orders, strict=True)
        }
        malformed_session = f"demo-{self.run_id}-malformed"
        with (
            ServiceBusClient.from_connection_string(
                self.stack.servicebus_connection_string
            ) as client,
            client.get_queue_sender(self.purchase_queue) as sender,
        ):
            sender.send_messages(
                ServiceBusMessage(
                    MALFORMED_BODY,
                    session_id=malformed_session,
                    message_id=f"{malformed_session}:1",
                    content_type="application/json",
                    application_properties={"pipeline": "purchase", "step": 1, "is_last": True},
                )
            )
        sessions[malformed_session] = "(malformed message)"
        failing = [o for o in orders if o.expect != COMPLETE]
        self.say(
            f"   202 Accepted for all {len(orders)} orders ({len(orders) - len(failing)} should "
            f"complete; designed to fail: "
            + ", ".join(f"{o.name} -> {o.expect}" for o in failing)
            + "), plus 1 malformed message"
        )
        return orders, sessions

    def process(self, orders: list[PlannedOrder], sessions: dict[str, str]) -> None:
        schedule = self.stack.settings.get("DLQ_ARCHIVE_SCHEDULE")
        self.step(f"The pipeline runs: 8 sessions at a time, the archive timer on '{schedule}'")
        must_complete = {s for s, name in sessions.items() if _expect(orders, name) == COMPLETE}
        must_fail = set(sessions) - must_complete

        def archived_failures() -> list[dict[str, Any]]:
            return [
                s
                for s in self.failed_sessions(self.purchase_queue)
                if s["session_id"] in must_fail and s["has_last"]
            ]

        def done() -> bool:
            return (
                must_complete <= set(self.receipts())
                and len(archived_failures()) == len(must_fail)
                and self.messages_left(self.purchase_queue) == 0
                and self.dead_letters_waiting() == 0
            )

        def progress() -> str:
            completed = len(must_complete & set(self.receipts()))
            return (
                f"{completed}/{len(must_complete)} orders completed, "
                f"{len(archived_failures())}/{len(must_fail)} failed sessions archived, "
                f"{self.dead_letters_waiting()} dead letters waiting for the archive, "
                f"{self.messages_left(self.purchase_queue)} messages left"
            )

        self.wait(done, progress, timeout=150)

    def report(self, orders: list[PlannedOrder], sessions: dict[str, str]) -> None:
        self.step("Report")
        receipts = self.receipts()
        completed = [(name, receipts[s]) for s, name in sessions.items() if s in receipts]
        self.say(f"   Completed sessions: {len(completed)} (receipt PDF in Blob, mailed)")
        for name, receipt in completed:
            self.say(f"     {receipt.order_number}  {receipt.total:>8} {receipt.currency}  {name}")
        must_complete = [s for s, name in sessions.items() if _expect(orders, name) == COMPLETE]
        self.check(
            f"the {len(must_complete)} orders without a designed failure completed, and no other",
            sorted(s for s in sessions if s in receipts) == sorted(must_complete),
        )

        groups = self.api.failure_groups()
        self.say("   Failed sessions by task and reason (GET /api/failed-session-groups):")
        for group in groups:
            self.say(
                f"     {group['sessions']:3d}  {group['queue']:<22} "
                f"{group['failed_task'] or '?':<22} {group['reason']}"
            )
        found = Counter(
            {
                f"{g['failed_task']}: {g['reason']}": g["sessions"]
                for g in groups
                if g["queue"] == self.purchase_queue
            }
        )
        self.check(
            "the purchase failures are exactly the designed ones",
            found == expected_failures(orders),
        )
        import_reasons = Counter(
            {g["reason"]: g["sessions"] for g in groups if g["queue"] == self.import_queue}
        )
        self.check(
            "the import's bad rows are archived with the field to fix in the reason",
            set(import_reasons) == set(CATALOGUE_INVALID),
        )

        purchase_failed = [
            s for s in self.failed_sessions(self.purchase_queue) if s["session_id"] in sessions
        ]
        in_order = all(self._short_circuited(s["session_id"]) for s in purchase_failed)
        self.check(
            "each failed purchase holds its failed task then every later task as SessionFailed, "
            "in send order",
            in_order and len(purchase_failed) == sum(expected_failures(orders).values()),
        )
        rows = Counter(
            str(entity.get("queue"))
            for entity in self.dead_letter_rows.list_entities(select=["queue"])
        )
        self.say(
            f"   Rows archived in Table Storage ({DEAD_LETTERS_TABLE}): {sum(rows.values())} ("
            + ", ".join(f"{queue}: {n}" for queue, n in sorted(rows.items()))
            + ")"
        )
        left = {q: self.queue_counts(q) for q in (self.purchase_queue, self.import_queue)}
        self.check(
            "the queues and their dead-letter queues are empty (the timer archived everything)",
            all(
                c["active"] + c["scheduled"] + c["deferred"] + c["dead_lettered"] == 0
                for c in left.values()
            ),
        )

    def _short_circuited(self, session_id: str) -> bool:
        messages = self.api.failed_session(session_id)["messages"]
        steps = [m["step"] for m in messages]
        reasons = [m["reason"] for m in messages]
        return (
            steps == sorted(steps)
            and bool(messages)
            and reasons[0] != SESSION_FAILED
            and all(r == SESSION_FAILED for r in reasons[1:])
            and messages[-1]["is_last"]
        )

    def replay_outage(self, orders: list[PlannedOrder], sessions: dict[str, str]) -> None:
        self.step("The payment provider is back: replaying the sessions the outage broke")
        self.payments.reset_outage()
        broken = self.api.failed_sessions(
            queue=self.purchase_queue, task="ProcessPayment", reason="PaymentProviderUnavailable"
        )
        self.say(
            f"   GET /api/failed-sessions?task=ProcessPayment&reason=PaymentProviderUnavailable: "
            f"{len(broken)} sessions"
        )
        replays: dict[str, dict[str, Any]] = {}
        for summary in broken:
            key = f"demo-{self.run_id}-replay-{summary['session_id']}"
            accepted = self.api.replay(summary["session_id"], idempotency_key=key)
            replays[summary["session_id"]] = {**summary, "new": accepted, "key": key}
            self.say(
                f"   POST /api/failed-sessions/{summary['session_id']}/replay -> 202, "
                f"{accepted['sent']} messages sent as session {accepted['new_session_id']}"
            )
        outage_orders = [s for s, n in sessions.items() if "Unavailable" in _expect(orders, n)]
        self.check(
            f"the {len(OUTAGE_CARDS)} outage sessions were found and replayed",
            sorted(replays) == sorted(outage_orders),
        )

        self.wait(
            lambda: set(replays) <= set(self.receipts()),
            lambda: (
                f"{len(set(replays) & set(self.receipts()))}/{len(replays)} replayed orders "
                f"completed, {self.messages_left(self.purchase_queue)} messages left"
            ),
            timeout=60,
        )
        receipts = self.receipts()
        charges = Counter(charge.idempotency_key for charge in self.payments.list_charges())
        by_key = {charge.idempotency_key: charge for charge in self.payments.list_charges()}
        for session_id, replay in replays.items():
            context = replay.get("context") or {}
            receipt = receipts.get(session_id)
            charge = by_key.get(f"{session_id}:payment")
            name = sessions[session_id]
            if receipt is None or charge is None:
                self.check(f"{name}'s replayed order completed", False)
                continue
            self.say(
                f"   {name}: order {receipt.order_number}, {receipt.total} {receipt.currency} "
                f"charged as {charge.charge_id}, under session {replay['new']['new_session_id']}"
            )
            self.check(
                f"{name}: original order number {context.get('order_number')} and total "
                f"{context.get('total')}, card charged once",
                receipt.order_number == context.get("order_number")
                and Decimal(receipt.total) == Decimal(str(context.get("total")))
                and charge.amount == Decimal(receipt.total)
                and charges[f"{session_id}:payment"] == 1,
            )
        statuses = {s["session_id"]: s for s in self.failed_sessions(self.purchase_queue)}
        self.check(
            "the archive marks them replayed, with their new session ids",
            all(
                statuses[s]["status"] == "replayed"
                and statuses[s]["replayed_session_id"] == r["new"]["new_session_id"]
                for s, r in replays.items()
            ),
        )
        if replays:
            session_id, replay = next(iter(replays.items()))
            again = self.api.replay(session_id, idempotency_key=replay["key"])
            self.check(
                "repeating a replay request with the same Idempotency-Key gets the first "
                "response again and sends nothing",
                again == replay["new"],
            )
        completed = len(set(self.receipts()))
        self.check(
            f"one charge per completed order ({completed}), none for the declined card",
            sum(charges.values()) == completed and all(n == 1 for n in charges.values()),
        )


def _expect(orders: Iterable[PlannedOrder], name: str) -> str:
    for planned in orders:
        if planned.name == name:
            return planned.expect
    return "(unreadable message): MalformedMessage"


def _receipt_of(mail: EmailMessage) -> Receipt | None:
    message_id = str(mail.get("Message-ID", "")).strip("<> ")
    subject = _RECEIPT_SUBJECT.search(str(mail.get("Subject", "")))
    if not message_id.endswith(".receipt@pipelines.local") or not subject:
        return None
    body = mail.get_body(preferencelist=("plain",))
    charged = _CHARGED.search(body.get_content() if body else "")
    return Receipt(
        job_id=message_id.removesuffix(".receipt@pipelines.local"),
        order_number=subject.group(1),
        total=charged.group(1) if charged else "?",
        currency=charged.group(2) if charged else "?",
    )
