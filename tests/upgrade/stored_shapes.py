"""Every shape the app stores, sends or derives from a key, written by its real writer from
fixed samples and read back as it was stored: what docs/deploy.md's "Stored shapes" lists,
by the name the table gives it. Table entities and blobs are written on Azurite
(``shapes_tables``); session state, messages and ids by the code that makes them
(``shapes_messages``); ``shape_structures`` says what a fingerprint covers."""

from __future__ import annotations

from collections.abc import Callable

from . import shapes_messages as m
from . import shapes_tables as t
from .shape_structures import Storage, fingerprint

__all__ = ["SHAPES", "Storage", "fingerprint"]

SHAPES: dict[str, Callable[[Storage], object]] = {
    "products": t.products,
    "ordernumbers": t.order_numbers,
    "simulatedpayments": t.payments,
    "deadletters": t.dead_letters,
    "deadletter-bodies blobs": t.dead_letter_bodies,
    "failedsessions": t.failed_sessions,
    "replayrequests": t.replay_requests,
    "importprogress": t.import_progress,
    "importjobs": t.import_jobs,
    "idempotencykeys": t.idempotency_keys,
    "orderprogress": t.order_progress,
    "operatoraudit": t.operator_audit,
    "confirmations": t.confirmations,
    "sessionoutcomes": t.session_outcomes,
    "pipelinepauses": t.pipeline_pauses,
    "receiptemails": t.receipt_emails,
    "timerruns": t.timer_runs,
    "receipts blobs": t.receipts,
    "session state": m.session_state,
    "purchase session state": m.purchase_state,
    "import session state": m.import_state,
    "task messages": m.task_messages,
    "replayed messages": m.replayed_messages,
    "replay-requests queue messages": m.replay_queue_messages,
    "ids derived from keys": m.derived_ids,
}
