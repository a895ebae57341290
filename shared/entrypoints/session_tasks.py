"""The part both Service Bus session triggers share: message in, processor, settlement out."""

from __future__ import annotations

import logging

from azure.servicebus import ServiceBusReceivedMessage
from azurefunctions.extensions.bindings.servicebus import ServiceBusMessageActions

from ..service_layer.processor import Result, SessionProcessor
from .servicebus_actions import FunctionSessionActions, incoming_message

logger = logging.getLogger(__name__)


def handle_session_message(
    processor: SessionProcessor,
    message: ServiceBusReceivedMessage,
    message_actions: ServiceBusMessageActions,
) -> Result:
    """Run one message through ``processor``; the processor settles it (complete, abandon or
    dead-letter) through ``message_actions`` before this returns. Logs the outcome, never the
    body (it holds customer data)."""
    incoming = incoming_message(message)
    result = processor.handle(incoming, FunctionSessionActions(message_actions, message))
    logger.info(
        "pipeline=%s session=%s message=%s delivery_count=%s outcome=%s%s",
        processor.pipeline,
        incoming.session_id,
        incoming.message_id,
        incoming.delivery_count,
        result.outcome.value,
        f" reason={result.reason}" if result.reason else "",
    )
    return result
