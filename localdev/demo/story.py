"""The demo's story, act by act: what it does to the stack, what it tells (``narration``), and
which claims it checks (``checks``) against what the stack shows (``observed``)."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from azure.servicebus import ServiceBusClient, ServiceBusMessage

from localdev.stack import LocalStack

from . import catalogue, checks
from .narration import Narrator
from .observed import Observed
from .scenario import (
    CATALOGUE,
    CATALOGUE_INVALID,
    CATALOGUE_ROWS,
    COMPLETE,
    MALFORMED_BODY,
    MALFORMED_EXPECT,
    OUTAGE_CARDS,
    PlannedOrder,
    expected_failures,
    planned_orders,
)

IMPORT_SESSIONS = 3


class DemoAborted(RuntimeError):
    """The story cannot go on (a service did not start, the Spark job failed...)."""


@dataclass(frozen=True)
class Submitted:
    """The orders sent, and the session of each (plus the malformed message's)."""

    orders: list[PlannedOrder]
    names: dict[str, str]  # session id -> customer name, or "(malformed message)"

    def expect(self, session_id: str) -> str:
        name = self.names[session_id]
        planned = next((o for o in self.orders if o.name == name), None)
        return planned.expect if planned else MALFORMED_EXPECT

    def completing(self) -> set[str]:
        return {s for s in self.names if self.expect(s) == COMPLETE}

    def failing(self) -> set[str]:
        return set(self.names) - self.completing()


class Story:
    def __init__(self, stack: LocalStack, log_file: Path, narrator: Narrator) -> None:
        self.stack = stack
        self.log_file = log_file
        self.tell = narrator
        self.seen = Observed(stack)
        self.api = self.seen.api
        self.checks = checks.Checks()
        self.run_id = uuid.uuid4().hex[:8]

    def check(self, claim: str, ok: bool) -> bool:
        self.checks.record(claim, ok)
        self.tell.verdict(claim, ok)
        return ok

    def run(self) -> bool:
        self.import_catalogue()
        submitted = self.submit_orders()
        self.process(submitted)
        self.report(submitted)
        self.replay_outage(submitted)
        failed = self.checks.failed()
        if failed:
            self.tell.say(f"\n== {len(failed)} of {len(self.checks.verdicts)} checks FAILED:")
            for claim in failed:
                self.tell.say(f"   - {claim}")
            return False
        self.tell.say(
            f"\n== The story came out as expected: {len(self.checks.verdicts)} checks passed "
            f"in {self.tell.elapsed():.0f} s."
        )
        return True

    # -- act 1: the catalogue --------------------------------------------------------------

    def import_catalogue(self) -> None:
        job_id = f"demo-catalogue-{self.run_id}"
        queue = self.seen.import_queue
        why_not = catalogue.spark_unavailable()
        relative = CATALOGUE.relative_to(CATALOGUE.parents[2])
        if why_not is None:
            self.tell.step(f"Importing the product catalogue {relative} with the Spark job")
            run = self._run_spark(job_id)
        else:
            self.tell.step(f"Importing the product catalogue {relative} through the import queue")
            self.tell.say(
                f"   Local Spark cannot run here: {why_not}. The demo sends the rows to the "
                "import queue itself, the way the Spark job would (install a JDK 17 to see "
                "the Spark job do it)."
            )
            run = catalogue.import_through_queue(
                CATALOGUE,
                job_id=job_id,
                queue=queue,
                sessions=IMPORT_SESSIONS,
                servicebus_connection_string=self.stack.servicebus_connection_string,
            )
        self.tell.say(
            f"   The import job ({run.engine}) is done: {run.rows_read} rows read, "
            f"{run.rows_rejected} rejected as unreadable, {run.rows_sent} sent in "
            f"{run.sessions} sessions"
        )
        self.check(
            f"the job read {CATALOGUE_ROWS} rows, rejected the unreadable one and sent the rest",
            checks.import_counted_as_planned(run),
        )
        self.tell.say("   The import tasks check and upsert each row; bad ones are dead-lettered.")
        self.tell.wait(
            lambda: (
                checks.import_outcomes(self.seen.import_status(job_id)) >= run.rows_sent
                and self.seen.messages_left(queue) == 0
            ),
            lambda: self._import_progress(job_id),
            timeout=60,
        )
        invalid = sum(CATALOGUE_INVALID.values())
        self.check(
            f"{run.rows_sent - invalid} products imported and {invalid} bad rows dead-lettered: "
            "the import went on past them",
            checks.import_went_past_bad_rows(
                self.seen.import_status(job_id) or {"rows_imported": 0, "rows_failed": 0},
                run.rows_sent,
            ),
        )

    def _run_spark(self, job_id: str) -> catalogue.ImportRun:
        self.tell.say(
            "   python -m spark_jobs.product_import on local[2]: the JVM and a Spark session "
            "start first (the slowest part of the demo), then it reads the CSV and sends the "
            f"rows to {self.seen.import_queue} in {IMPORT_SESSIONS} sessions."
        )
        job = catalogue.SparkImport(
            CATALOGUE,
            job_id=job_id,
            queue=self.seen.import_queue,
            sessions=IMPORT_SESSIONS,
            servicebus_connection_string=self.stack.servicebus_connection_string,
            storage_connection_string=self.stack.storage_connection_string,
            log_file=self.log_file,
        )

        heard = False

        def progress() -> str:
            nonlocal heard
            for line in job.news():
                heard = True
                self.tell.say(f"   spark: {line}")
            if not heard and self.seen.import_status(job_id) is None:
                return "waiting for Spark to start and read the CSV (nothing sent yet)"
            return "Spark job running; " + self._import_progress(job_id)

        try:
            self.tell.wait(job.finished, progress, timeout=self.tell.deadline - time.monotonic())
            run = job.result(timeout=max(1.0, self.tell.deadline - time.monotonic()))
        except RuntimeError as error:
            raise DemoAborted(str(error)) from error
        finally:
            job.stop()
        for line in job.news():
            self.tell.say(f"   spark: {line}")
        return run

    def _import_progress(self, job_id: str) -> str:
        status = self.seen.import_status(job_id)
        waiting = self.seen.messages_left(self.seen.import_queue)
        if status is None:
            api = "404 (nothing received yet)"
        else:
            sent = "" if status.get("rows_sent") is None else f"{status['rows_sent']} sent, "
            api = (
                f"{status['status']}, {sent}{status['rows_imported']} imported, "
                f"{status['rows_failed']} dead-lettered"
            )
        return f"GET /api/imports/{job_id}: {api}; {waiting} rows waiting on the queue"

    # -- act 2: the orders -----------------------------------------------------------------

    def submit_orders(self) -> Submitted:
        orders = planned_orders()
        queue = self.seen.purchase_queue
        self.tell.step(
            f"Submitting {len(orders)} orders through POST /api/orders, and a malformed message "
            "straight to the queue"
        )
        self.seen.payments.set_outage(OUTAGE_CARDS)
        self.tell.say(
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
        names = {
            answer["session_id"]: planned.name
            for answer, planned in zip(accepted, orders, strict=True)
        }
        malformed_session = f"demo-{self.run_id}-malformed"
        with (
            ServiceBusClient.from_connection_string(
                self.stack.servicebus_connection_string
            ) as client,
            client.get_queue_sender(queue) as sender,
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
        names[malformed_session] = "(malformed message)"
        failing = [o for o in orders if o.expect != COMPLETE]
        self.tell.say(
            f"   202 Accepted for all {len(orders)} orders ({len(orders) - len(failing)} should "
            f"complete; designed to fail: "
            + ", ".join(f"{o.name} -> {o.expect}" for o in failing)
            + "), plus 1 malformed message"
        )
        return Submitted(orders, names)

    def process(self, submitted: Submitted) -> None:
        schedule = self.stack.settings.get("DLQ_ARCHIVE_SCHEDULE")
        queue = self.seen.purchase_queue
        at_once = self.stack.host.options.service_bus.max_concurrent_sessions
        self.tell.step(
            f"The pipeline runs: {at_once} sessions at a time, the archive timer on '{schedule}'"
        )
        must_complete, must_fail = submitted.completing(), submitted.failing()

        def archived_failures() -> int:
            return sum(
                1
                for s in self.seen.failed_sessions(queue)
                if s["session_id"] in must_fail and s["has_last"]
            )

        def done() -> bool:
            return (
                must_complete <= set(self.seen.receipts())
                and archived_failures() == len(must_fail)
                and self.seen.messages_left(queue) == 0
                and self.seen.dead_letters_waiting() == 0
            )

        def progress() -> str:
            completed = len(must_complete & set(self.seen.receipts()))
            return (
                f"{completed}/{len(must_complete)} orders completed, "
                f"{archived_failures()}/{len(must_fail)} failed sessions archived, "
                f"{self.seen.dead_letters_waiting()} dead letters waiting for the archive, "
                f"{self.seen.messages_left(queue)} messages left"
            )

        self.tell.wait(done, progress, timeout=150)

    # -- act 3: the report -----------------------------------------------------------------

    def report(self, submitted: Submitted) -> None:
        self.tell.step("Report")
        purchase, imports = self.seen.purchase_queue, self.seen.import_queue
        receipts = self.seen.receipts()
        completed = [(s, name) for s, name in submitted.names.items() if s in receipts]
        self.tell.say(
            f"   Completed sessions: {len(completed)} (receipt PDF in Blob, mailed through "
            "Communication Services Email)"
        )
        for session, name in completed:
            receipt = receipts[session]
            self.tell.say(
                f"     {receipt.order_number}  {receipt.total:>8} {receipt.currency}  {name}"
            )
        must_complete = submitted.completing()
        self.check(
            f"the {len(must_complete)} orders without a designed failure completed, and no other",
            {s for s, _ in completed} == must_complete,
        )

        groups = self.api.failure_groups()
        self.tell.say("   Failed sessions by task and reason (GET /api/failed-session-groups):")
        for group in groups:
            self.tell.say(
                f"     {group['sessions']:3d}  {group['queue']:<22} "
                f"{group['failed_task'] or '?':<22} {group['reason']}"
            )
        self.check(
            "the purchase failures are exactly the designed ones",
            checks.purchase_failures_as_designed(groups, purchase, submitted.orders),
        )
        self.check(
            "the import's bad rows are archived with the field to fix in the reason",
            checks.import_failures_name_the_field(groups, imports),
        )

        failed = [
            s for s in self.seen.failed_sessions(purchase) if s["session_id"] in submitted.names
        ]
        self.check(
            "each failed purchase holds its failed task then every later task as SessionFailed, "
            "in send order",
            len(failed) == sum(expected_failures(submitted.orders).values())
            and all(
                checks.short_circuited(self.api.failed_session(s["session_id"])["messages"])
                for s in failed
            ),
        )
        rows = self.seen.archived_rows_per_queue()
        self.tell.say(
            f"   Rows archived in Table Storage: {sum(rows.values())} ("
            + ", ".join(f"{queue}: {n}" for queue, n in sorted(rows.items()))
            + ")"
        )
        self.check(
            "the queues and their dead-letter queues are empty (the timer archived everything)",
            checks.queues_drained(self.seen.queue_counts(q) for q in (purchase, imports)),
        )

    # -- act 4: the replay -----------------------------------------------------------------

    def replay_outage(self, submitted: Submitted) -> None:
        queue = self.seen.purchase_queue
        self.tell.step("The payment provider is back: replaying the sessions the outage broke")
        self.seen.payments.reset_outage()
        broken = self.api.failed_sessions(
            queue=queue, task="ProcessPayment", reason="PaymentProviderUnavailable"
        )
        self.tell.say(
            f"   GET /api/failed-sessions?task=ProcessPayment&reason=PaymentProviderUnavailable: "
            f"{len(broken)} sessions"
        )
        replays: dict[str, dict[str, Any]] = {}
        for summary in broken:
            key = f"demo-{self.run_id}-replay-{summary['session_id']}"
            accepted = self.api.replay(summary["session_id"], idempotency_key=key)
            replays[summary["session_id"]] = {**summary, "new": accepted, "key": key}
            self.tell.say(
                f"   POST /api/failed-sessions/{summary['session_id']}/replay -> 202, "
                f"{accepted['sent']} messages sent as session {accepted['new_session_id']}"
            )
        outage = {s for s in submitted.names if "Unavailable" in submitted.expect(s)}
        self.check(
            f"the {len(OUTAGE_CARDS)} outage sessions were found and replayed",
            set(replays) == outage,
        )

        self.tell.wait(
            lambda: set(replays) <= set(self.seen.receipts()),
            lambda: (
                f"{len(set(replays) & set(self.seen.receipts()))}/{len(replays)} replayed "
                f"orders completed, {self.seen.messages_left(queue)} messages left"
            ),
            timeout=60,
        )
        receipts = self.seen.receipts()
        all_charges = self.seen.payments.list_charges()
        charges = Counter(charge.idempotency_key for charge in all_charges)
        by_key = {charge.idempotency_key: charge for charge in all_charges}
        for session_id, replay in replays.items():
            receipt = receipts.get(session_id)
            charge = by_key.get(f"{session_id}:payment")
            name = submitted.names[session_id]
            if receipt is None or charge is None:
                self.check(f"{name}'s replayed order completed", False)
                continue
            context = replay.get("context") or {}
            self.tell.say(
                f"   {name}: order {receipt.order_number}, {receipt.total} {receipt.currency} "
                f"charged as {charge.charge_id}, under session {replay['new']['new_session_id']}"
            )
            self.check(
                f"{name}: original order number {context.get('order_number')} and total "
                f"{context.get('total')}, card charged once",
                checks.replay_kept_the_order(
                    receipt, context, charge, charges[f"{session_id}:payment"]
                ),
            )
        summaries = {s["session_id"]: s for s in self.seen.failed_sessions(queue)}
        self.check(
            "the archive marks them replayed, with their new session ids",
            checks.marked_replayed(
                summaries, {s: r["new"]["new_session_id"] for s, r in replays.items()}
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
        completed = len(self.seen.receipts())
        self.check(
            f"one charge per completed order ({completed}), none for the declined card",
            checks.one_charge_per_order(charges, completed),
        )
