"""The part both Service Bus session triggers share: message in, processor, settlement out."""

from __future__ import annotations

import logging

from azure.servicebus import ServiceBusReceivedMessage
from azurefunctions.extensions.bindings.servicebus import ServiceBusMessageActions

from ..service_layer.processor import Result, SessionProcessor
from ..service_layer.task_telemetry import task_invocation
from ..telemetry.context import InvocationTrace
from .servicebus_actions import FunctionSessionActions, incoming_message

logger = logging.getLogger(__name__)


def handle_session_message(
    processor: SessionProcessor,
    message: ServiceBusReceivedMessage,
    message_actions: ServiceBusMessageActions,
    *,
    queue: str,
    trace_context: InvocationTrace | None = None,
) -> Result:
    """Run one message of ``queue`` through ``processor``; the processor settles it
    (complete, abandon or dead-letter) through ``message_actions`` before this returns. The run
    is a span in the message's trace (``trace_context``: the invocation's, from the host).
    Logs the outcome, never the body (it holds customer data)."""
    incoming = incoming_message(message)
    with task_invocation(
        pipeline=processor.pipeline,
        queue=queue,
        incoming=incoming,
        invocation_trace=trace_context,
    ) as record:
        result = processor.handle(incoming, FunctionSessionActions(message_actions, message))
        record(result)
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
