"""Bulk replay requests onto an Azure Storage queue, encoded as the Functions host expects."""

from __future__ import annotations

import json

from azure.storage.queue import QueueClient, TextBase64EncodePolicy

from .azure_errors import QUEUE_STORAGE, translated


def replay_queue_client(queue: QueueClient) -> QueueClient:
    """The same queue with base64 message text: the queue trigger's default encoding."""
    return QueueClient.from_queue_url(
        queue.url,
        credential=queue.credential,
        message_encode_policy=TextBase64EncodePolicy(),
    )


class StorageQueueReplayQueue:
    """Implements ReplayQueue."""

    def __init__(self, queue: QueueClient) -> None:
        self._queue = queue

    @translated(QUEUE_STORAGE)
    def enqueue(self, request_id: str) -> None:
        self._queue.send_message(json.dumps({"request_id": request_id}))
