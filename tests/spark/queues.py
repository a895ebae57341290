"""The import queue on the project's Service Bus emulator: what the job put there."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusClient
from azure.servicebus.exceptions import OperationTimeoutError

QUEUE = "product-import-tasks"

# The app's own local config (infra/local/config.json): the import queue exactly as the app
# and make up get it, duplicate detection included.
APP_CONFIG = Path(__file__).resolve().parents[2] / "infra" / "local" / "config.json"


def drain(connection_string: str) -> dict[str, list[dict]]:
    """Every message on the queue, session by session, in delivery order (completed): its
    body, its id and its application properties (``properties``, as text)."""
    sessions: dict[str, list[dict]] = {}
    # No retries: the SDK retries "no session available" as a timeout, 4 x max_wait_time.
    with ServiceBusClient.from_connection_string(connection_string, retry_total=0) as client:
        while True:
            try:
                receiver = client.get_queue_receiver(
                    QUEUE, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=1
                )
                with receiver:
                    for message in receiver:
                        body = json.loads(b"".join(message.body))
                        sessions.setdefault(str(message.session_id), []).append(
                            {
                                "message_id": message.message_id,
                                "properties": _text(message.application_properties or {}),
                                **body,
                            }
                        )
                        receiver.complete_message(message)
            except OperationTimeoutError:
                return sessions


def _text(properties: dict[Any, Any]) -> dict[str, Any]:
    """Application properties as received (the AMQP decoder's bytes) as text."""
    return {
        (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
        for k, v in properties.items()
    }


def peek_session(connection_string: str, session_id: str) -> int:
    """How many messages the session holds, without settling any."""
    with (
        ServiceBusClient.from_connection_string(connection_string) as client,
        client.get_queue_receiver(QUEUE, session_id=session_id, max_wait_time=2) as receiver,
    ):
        return len(receiver.peek_messages(max_message_count=1000))


def assert_arrived_once_in_order(
    sessions: dict[str, list[dict]], job_id: str, skus: list[str]
) -> None:
    received = [m for session_id in sorted(sessions) for m in sessions[session_id]]
    assert [m["payload"]["sku"] for m in received] == skus  # each once, sessions contiguous
    assert len({m["message_id"] for m in received}) == len(received)
    for messages in sessions.values():
        assert [m["step"] for m in messages] == list(range(1, len(messages) + 1))
        assert [m["is_last"] for m in messages] == [False] * (len(messages) - 1) + [True]
        assert all(m["job_id"] == job_id and m["task"] == "ImportProduct" for m in messages)
