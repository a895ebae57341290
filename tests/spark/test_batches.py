"""How a partition's rows are cut into batches, with real ServiceBusMessageBatch-es and a
recording sender (the emulator tests cover the broker side)."""

from __future__ import annotations

import json

from azure.servicebus import ServiceBusMessageBatch

from spark_jobs.product_import.columns import FIELDS
from spark_jobs.product_import.sending import send_rows

from .catalogues import product


class RecordingSender:
    def __init__(self, max_size_in_bytes: int) -> None:
        self.max_size_in_bytes = max_size_in_bytes
        self.sent: list[list] = []

    def create_message_batch(self) -> ServiceBusMessageBatch:
        return ServiceBusMessageBatch(max_size_in_bytes=self.max_size_in_bytes)

    def send_messages(self, batch: ServiceBusMessageBatch) -> None:
        self.sent.append(list(batch._messages))


def planned(sessions: int, per_session: int) -> list[dict]:
    rows = []
    for k in range(sessions):
        for step in range(1, per_session + 1):
            number = k * per_session + step
            rows.append(
                {**product(number), "row_number": number, "session_id": f"j-{k:04d}",
                 "step": step, "is_last": step == per_session}
            )  # fmt: skip
    return rows


def test_batches_fill_to_the_size_limit_keep_order_and_never_mix_sessions() -> None:
    sender = RecordingSender(max_size_in_bytes=4096)

    sent = send_rows(sender, "j", planned(3, 25))

    assert sent == 75
    assert len(sender.sent) > 3  # 25 messages of ~400 bytes do not fit one 4 KiB batch
    for batch in sender.sent:
        assert len({m.session_id for m in batch}) == 1
    messages = [m for batch in sender.sent for m in batch]
    assert [m.message_id for m in messages] == [f"j:{n}" for n in range(1, 76)]
    bodies = [json.loads(b"".join(m.body)) for m in messages]
    assert [b["step"] for b in bodies[:25]] == list(range(1, 26))
    assert [b["is_last"] for b in bodies].count(True) == 3
    assert messages[0].application_properties["task"] == "ImportProduct"
    assert all(set(b["payload"]) == set(FIELDS) for b in bodies)  # the catalogue's columns
