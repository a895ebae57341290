"""The part the Service Bus session triggers share: message (or a batch of them) in,
processor, settlement out."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from azure.servicebus import ServiceBusReceivedMessage
from azurefunctions.extensions.bindings.servicebus import ServiceBusMessageActions

from ..service_layer.processor import IncomingMessage, Result, SessionProcessor
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
    completed_by_trigger: bool = False,
) -> Result:
    """Run one message of ``queue`` through ``processor``; the processor settles it
    (complete, abandon or dead-letter) through ``message_actions`` before this returns,
    except, with ``completed_by_trigger``, a completion it leaves to the trigger. The run
    is a span in the message's trace (``trace_context``: the invocation's, from the host).
    Logs the outcome, never the body (it holds customer data)."""
    incoming = incoming_message(message)
    with task_invocation(
        pipeline=processor.pipeline,
        queue=queue,
        incoming=incoming,
        invocation_trace=trace_context,
    ) as record:
        result = processor.handle(
            incoming,
            FunctionSessionActions(message_actions, message),
            completed_by_trigger=completed_by_trigger,
        )
        record(result)
        _log(processor, incoming, result)
    return result


def handle_session_batch(
    processor: SessionProcessor,
    messages: Sequence[ServiceBusReceivedMessage],
    message_actions: ServiceBusMessageActions,
    *,
    queue: str,
    completed_by_trigger: bool = False,
) -> list[Result]:
    """Run a batch of one session's messages of ``queue`` through ``processor``
    (``handle_batch``), which settles each through ``message_actions`` before this returns,
    except, with ``completed_by_trigger``, the completions it leaves to the trigger.
    Each message is a span in its own trace (its sender's), recorded once the batch is done:
    the batch's requests are made for several messages at once, so they are in none of them."""
    incomings = [incoming_message(message) for message in messages]
    results = processor.handle_batch(
        [
            (incoming, FunctionSessionActions(message_actions, message))
            for incoming, message in zip(incomings, messages, strict=True)
        ],
        completed_by_trigger=completed_by_trigger,
    )
    for incoming, result in zip(incomings, results, strict=True):
        with task_invocation(pipeline=processor.pipeline, queue=queue, incoming=incoming) as record:
            record(result)
        _log(processor, incoming, result)
    return results


def _log(processor: SessionProcessor, incoming: IncomingMessage, result: Result) -> None:
    logger.info(
        "pipeline=%s session=%s message=%s delivery_count=%s outcome=%s%s",
        processor.pipeline,
        incoming.session_id,
        incoming.message_id,
        incoming.delivery_count,
        result.outcome.value,
        f" reason={result.reason}" if result.reason else "",
    )
