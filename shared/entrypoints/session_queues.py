"""The Service Bus triggers of the pipelines' session queues: one function per declared
pipeline (``shared.service_layer.pipelines``), each session-enabled on the queue its app setting
names and settled by the app (autoComplete off).

The host indexes each as a function of its own (``function_name``); the worker reads the
SDK-type binding from the annotations of the function ``session_queue_trigger`` defines, and
hands it the invocation's ``context``, whose trace context (the message's, from the host) the
task's span continues.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import List  # noqa: UP035 (the worker refuses list[...] as a binding's annotation)

import azure.functions as func
import azurefunctions.extensions.bindings.servicebus as servicebus

from ..bootstrap import Container, container
from ..config import Settings
from ..service_layer.pipelines import Pipeline, registry
from ..service_layer.processor import SessionProcessor
from .session_tasks import handle_session_batch, handle_session_message

SessionTrigger = Callable[
    [servicebus.ServiceBusReceivedMessage, servicebus.ServiceBusMessageActions, func.Context],
    None,
]
SessionBatchTrigger = Callable[
    [List[servicebus.ServiceBusReceivedMessage], servicebus.ServiceBusMessageActions],  # noqa: UP006
    None,
]

bp = func.Blueprint()


def session_queue_trigger(
    name: str,
    queue_setting: str,
    queue: Callable[[Settings], str],
    processor: Callable[[Container], SessionProcessor],
) -> SessionTrigger:
    """Register the function ``name`` on ``bp``: a trigger on the session queue whose name is
    in the app setting ``queue_setting`` (a setting's name, never a value; ``queue`` reads its
    value from the settings, for the task spans), over the ``ServiceBusConnection``
    connection, running each message through the container's ``processor``. Returns the
    function, callable as the worker calls it."""

    @bp.function_name(name)
    @bp.service_bus_queue_trigger(
        arg_name="message",
        queue_name=f"%{queue_setting}%",
        connection="ServiceBusConnection",
        is_sessions_enabled=True,
        auto_complete_messages=False,
    )
    def session_task(
        message: servicebus.ServiceBusReceivedMessage,
        message_actions: servicebus.ServiceBusMessageActions,
        context: func.Context,
    ) -> None:
        c = container()
        handle_session_message(
            processor(c),
            message,
            message_actions,
            queue=queue(c.settings),
            trace_context=context.trace_context,
        )

    return session_task


def session_batch_trigger(
    name: str,
    queue_setting: str,
    queue: Callable[[Settings], str],
    processor: Callable[[Container], SessionProcessor],
) -> SessionBatchTrigger:
    """As ``session_queue_trigger``, with the extension's batch session trigger
    (``cardinality="many"``): each invocation gets up to host.json's ``maxMessageBatchSize``
    messages of one session, in order, and the processor runs them as a batch
    (``handle_batch``). The extension runs one such batch at a time per instance, whatever
    ``maxConcurrentSessions`` says (docs/processor.md, "Batches")."""

    @bp.function_name(name)
    @bp.service_bus_queue_trigger(
        arg_name="messages",
        queue_name=f"%{queue_setting}%",
        connection="ServiceBusConnection",
        is_sessions_enabled=True,
        auto_complete_messages=False,
        cardinality=func.Cardinality.MANY,
    )
    def session_batch(
        messages: List[servicebus.ServiceBusReceivedMessage],  # noqa: UP006 (see the import)
        message_actions: servicebus.ServiceBusMessageActions,
    ) -> None:
        c = container()
        handle_session_batch(processor(c), messages, message_actions, queue=queue(c.settings))

    return session_batch


def pipeline_batch_trigger(pipeline: Pipeline) -> SessionBatchTrigger:
    """The batch session trigger of a pipeline that declares ``batch``, named
    ``<pipeline>_tasks``."""
    return session_batch_trigger(
        pipeline.function_name,
        pipeline.queue_setting,
        lambda settings: settings.queue_of(pipeline.name),
        lambda c: c.processor(pipeline.name),
    )


def pipeline_trigger(pipeline: Pipeline) -> SessionTrigger:
    """The session trigger of a declared pipeline, named ``<pipeline>_tasks``."""
    return session_queue_trigger(
        pipeline.function_name,
        pipeline.queue_setting,
        lambda settings: settings.queue_of(pipeline.name),
        lambda c: c.processor(pipeline.name),
    )


# The trigger of each declared pipeline, by the pipeline's name: one message per invocation,
# or a batch of them for a pipeline that declares ``batch``.
TRIGGERS: dict[str, SessionTrigger] = {
    p.name: pipeline_trigger(p) for p in registry() if p.batch is None
}
BATCH_TRIGGERS: dict[str, SessionBatchTrigger] = {
    p.name: pipeline_batch_trigger(p) for p in registry() if p.batch is not None
}
