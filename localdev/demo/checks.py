"""The demo's checks: each claim the story makes, decided from what the stack shows, and the
record of every verdict. No output here: the story tells them (``narration``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from shared.domain.payments import Charge
from shared.domain.reasons import SESSION_FAILED

from .catalogue import ImportRun
from .observed import Receipt
from .scenario import (
    CATALOGUE_INVALID,
    CATALOGUE_REJECTED,
    CATALOGUE_ROWS,
    PlannedOrder,
    expected_failures,
)


@dataclass
class Checks:
    """Every claim checked so far, in order, with its verdict."""

    verdicts: list[tuple[str, bool]] = field(default_factory=list)

    def record(self, claim: str, ok: bool) -> bool:
        self.verdicts.append((claim, ok))
        return ok

    def failed(self) -> list[str]:
        return [claim for claim, ok in self.verdicts if not ok]


def import_counted_as_planned(run: ImportRun) -> bool:
    """The job read the catalogue's rows, rejected the unreadable one and sent the rest."""
    return (run.rows_read, run.rows_rejected, run.rows_sent) == (
        CATALOGUE_ROWS,
        CATALOGUE_REJECTED,
        CATALOGUE_ROWS - CATALOGUE_REJECTED,
    )


def import_went_past_bad_rows(status: Mapping[str, Any], rows_sent: int) -> bool:
    """Every valid row imported, every invalid one dead-lettered."""
    invalid = sum(CATALOGUE_INVALID.values())
    return (status["rows_imported"], status["rows_failed"]) == (rows_sent - invalid, invalid)


def import_outcomes(status: Mapping[str, Any] | None) -> int:
    """Rows of an import with an outcome (imported or dead-lettered) so far."""
    return int(status["rows_imported"]) + int(status["rows_failed"]) if status else 0


def purchase_failures_as_designed(
    groups: Iterable[Mapping[str, Any]], queue: str, orders: list[PlannedOrder]
) -> bool:
    found = Counter(
        {f"{g['failed_task']}: {g['reason']}": g["sessions"] for g in groups if g["queue"] == queue}
    )
    return found == expected_failures(orders)


def import_failures_name_the_field(groups: Iterable[Mapping[str, Any]], queue: str) -> bool:
    """The import's dead-lettered rows are grouped under reasons that name the field to fix."""
    return {g["reason"] for g in groups if g["queue"] == queue} == set(CATALOGUE_INVALID)


def short_circuited(messages: list[Mapping[str, Any]]) -> bool:
    """A failed session's archive: its failed task, then every later task as SessionFailed,
    in send order, up to the last message."""
    steps = [m["step"] for m in messages]
    reasons = [m["reason"] for m in messages]
    return (
        bool(messages)
        and steps == sorted(steps)
        and reasons[0] != SESSION_FAILED
        and all(reason == SESSION_FAILED for reason in reasons[1:])
        and bool(messages[-1]["is_last"])
    )


def queues_drained(counts: Iterable[Mapping[str, int]]) -> bool:
    """No message left on the queues or their dead-letter queues."""
    return all(sum(c.values()) == 0 for c in counts)


def replay_kept_the_order(
    receipt: Receipt, context: Mapping[str, Any], charge: Charge, times_charged: int
) -> bool:
    """A replayed order keeps the number and total its first run computed; its card is
    charged once, for that total."""
    return (
        receipt.order_number == context.get("order_number")
        and Decimal(receipt.total) == Decimal(str(context.get("total")))
        and charge.amount == Decimal(receipt.total)
        and times_charged == 1
    )


def marked_replayed(
    summaries: Mapping[str, Mapping[str, Any]], new_session_ids: Mapping[str, str]
) -> bool:
    """The archive marks each replayed session replayed, under its new session id."""
    return all(
        summaries[session]["status"] == "replayed"
        and summaries[session]["replayed_session_id"] == new_id
        for session, new_id in new_session_ids.items()
    )


def one_charge_per_order(charges: Counter[str], completed: int) -> bool:
    return sum(charges.values()) == completed and all(n == 1 for n in charges.values())
