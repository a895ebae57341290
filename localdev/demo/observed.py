"""What the running stack shows the demo, through the ways a user would look: the HTTP API,
the emulator's queue counts, the mail Communication Services Email (the local stand-in)
accepted, Table Storage."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Any

from azure.data.tables import TableClient

from localdev.api_client import AppClient
from localdev.stack import LocalStack
from shared.adapters.azure_clients import DEAD_LETTERS_TABLE, PAYMENTS_TABLE
from shared.adapters.simulated_payments import TableSimulatedPaymentGateway

_RECEIPT_SUBJECT = re.compile(r"order (\S+)$")
_CHARGED = re.compile(r"We charged (\S+) ([A-Z]{3})")
_RECEIPT_ID_SUFFIX = ".receipt@pipelines.local"
COUNTED = ("active", "scheduled", "deferred", "dead_lettered")


@dataclass(frozen=True)
class Receipt:
    job_id: str
    order_number: str
    total: str
    currency: str


class Observed:
    def __init__(self, stack: LocalStack) -> None:
        self.stack = stack
        self.api = AppClient(stack.api_url, stack.function_key)
        self.purchase_queue = stack.settings["PURCHASE_QUEUE_NAME"]
        self.import_queue = stack.settings["IMPORT_QUEUE_NAME"]
        connection = stack.storage_connection_string
        self.payments = TableSimulatedPaymentGateway(
            TableClient.from_connection_string(connection, PAYMENTS_TABLE)
        )
        self._dead_letter_rows = TableClient.from_connection_string(connection, DEAD_LETTERS_TABLE)

    def queue_counts(self, queue: str) -> dict[str, int]:
        counts = self.stack.emulator.counts().get(queue, {})
        return {name: int(counts.get(name, 0)) for name in COUNTED}

    def messages_left(self, queue: str) -> int:
        counts = self.queue_counts(queue)
        return counts["active"] + counts["scheduled"] + counts["deferred"]

    def dead_letters_waiting(self) -> int:
        """Dead letters of both pipelines that the archive timer has not moved yet."""
        return sum(
            self.queue_counts(queue)["dead_lettered"]
            for queue in (self.purchase_queue, self.import_queue)
        )

    def import_status(self, job_id: str) -> dict[str, Any] | None:
        """GET /api/imports/{job_id}; None while the API knows nothing of the job (404)."""
        return self.api.import_status(job_id)

    def receipts(self) -> dict[str, Receipt]:
        """Receipts mailed so far, by job id (the Message-ID is ``<job id>.receipt@...``)."""
        found = {}
        for mail in self.stack.email.received():
            receipt = receipt_of(mail)
            if receipt:
                found[receipt.job_id] = receipt
        return found

    def failed_sessions(self, queue: str) -> list[dict[str, Any]]:
        return self.api.failed_sessions(queue=queue, status="any")

    def archived_rows_per_queue(self) -> Counter[str]:
        return Counter(
            str(entity.get("queue"))
            for entity in self._dead_letter_rows.list_entities(select=["queue"])
        )


def receipt_of(mail: EmailMessage) -> Receipt | None:
    message_id = str(mail.get("Message-ID", "")).strip("<> ")
    subject = _RECEIPT_SUBJECT.search(str(mail.get("Subject", "")))
    if not message_id.endswith(_RECEIPT_ID_SUFFIX) or not subject:
        return None
    body = mail.get_body(preferencelist=("plain",))
    charged = _CHARGED.search(body.get_content() if body else "")
    return Receipt(
        job_id=message_id.removesuffix(_RECEIPT_ID_SUFFIX),
        order_number=subject.group(1),
        total=charged.group(1) if charged else "?",
        currency=charged.group(2) if charged else "?",
    )
