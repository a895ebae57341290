"""The Storage queue trigger that runs a bulk replay requested through the API
(``failed_sessions_http``: ``POST /api/replays``)."""

from __future__ import annotations

import json
import logging

import azure.functions as func

from ..bootstrap import container
from ..domain.replays import ReplayRequestNotFound
from ..service_layer.bulk_replay import mark_bulk_replay_failed, run_bulk_replay

logger = logging.getLogger(__name__)
bp = func.Blueprint()


@bp.queue_trigger(
    arg_name="msg", queue_name="%REPLAY_QUEUE_NAME%", connection="AzureWebJobsStorage"
)
def replay_requests(msg: func.QueueMessage) -> None:
    """Perform a bulk replay. A request that keeps failing goes to the poison queue, and its
    status says why before it does."""
    try:
        request_id = json.loads(msg.get_body())["request_id"]
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(
            f"Queue message {msg.id} is not a replay request ({error!r}); it goes to the poison "
            "queue untouched."
        ) from error
    c = container()
    try:
        run_bulk_replay(
            c.replay_requests,
            c.archive,
            c.resender,
            c.session_seeder,
            request_id,
            audit=c.audit_trail,
            pipelines=c.pipelines.declared,
        )
    except ReplayRequestNotFound:
        logger.error("Replay request %s does not exist; the message is dropped.", request_id)
    except Exception as error:
        attempt = msg.dequeue_count or 1
        if attempt >= c.settings.replay_max_dequeue_count:
            try:
                mark_bulk_replay_failed(
                    c.replay_requests,
                    request_id,
                    f"Gave up after {attempt} attempts: {type(error).__name__}: {error}. The "
                    "request is in the poison queue; fix the cause and request the replay again.",
                )
            except Exception:
                logger.exception("Could not mark replay request %s failed", request_id)
        else:
            logger.warning(
                "Replay request %s failed on attempt %d; the queue delivers it again.",
                request_id,
                attempt,
            )
        raise
