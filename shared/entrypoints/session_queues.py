"""The Service Bus triggers of the pipelines' session queues: one function per declared
pipeline (``shared.bootstrap.app_pipelines``; as many as its ``batch_triggers`` for a batch
pipeline), each session-enabled on the queue its app setting names. Both kinds leave the
completion of a message whose task completed (not its session's last) to the host
(autoComplete on), which completes it after the invocation, where each completion by the app
is a call from the worker to the host; every other settlement is the app's.

Both kinds of trigger (one message per invocation, or a batch) are registered by one decorator,
``on_session_queue``. The host indexes each as a function of its own (``function_name``); the
worker reads the SDK-type binding from the annotations of the function each factory defines.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, List  # noqa: UP035 (the worker refuses list[...] as a binding's annotation)

import azure.functions as func
import azurefunctions.extensions.bindings.servicebus as servicebus

from ..bootstrap import app_pipelines, container
from ..domain.pipelines import Pipeline
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

# A trigger completes, after a successful invocation, the messages the processor left to it
# (a batch's all at once: the extension's TriggerAndCompleteMessagesInternal) and leaves alone
# those the function settled.
COMPLETED_BY_TRIGGER = True


def on_session_queue(
    pipeline: Pipeline,
    *,
    arg_name: str,
    function_name: str | None = None,
    auto_complete: bool = False,
    **options: Any,
) -> Callable[[Callable[..., None]], Any]:
    """Register the decorated function on ``bp`` as a session trigger of ``pipeline``, named
    ``function_name`` (``<pipeline>_tasks`` by default): on the session queue whose name is in
    the pipeline's app setting (a setting's name, never a value), over the
    ``ServiceBusConnection`` connection.
    ``auto_complete``: the host completes what the function left unsettled once it returns
    (``autoCompleteMessages``); else the app settles every message. ``options``: the
    trigger's other arguments (its cardinality)."""
    trigger = bp.service_bus_queue_trigger(
        arg_name=arg_name,
        queue_name=f"%{pipeline.queue_setting}%",
        connection="ServiceBusConnection",
        is_sessions_enabled=True,
        auto_complete_messages=auto_complete,
        **options,
    )
    name = bp.function_name(function_name or pipeline.function_name)

    def register(function: Callable[..., None]) -> Any:
        return name(trigger(function))

    return register


def pipeline_trigger(pipeline: Pipeline) -> SessionTrigger:
    """The session trigger of a declared pipeline: one message per invocation, run through the
    pipeline's processor, its task span continuing the invocation's trace context (the
    message's, from the host). Returns the function, callable as the worker calls it."""

    @on_session_queue(pipeline, arg_name="message", auto_complete=COMPLETED_BY_TRIGGER)
    def session_task(
        message: servicebus.ServiceBusReceivedMessage,
        message_actions: servicebus.ServiceBusMessageActions,
        context: func.Context,
    ) -> None:
        c = container()
        handle_session_message(
            c.processor(pipeline.name),
            message,
            message_actions,
            queue=c.settings.queue_of(pipeline.name),
            trace_context=context.trace_context,
            completed_by_trigger=COMPLETED_BY_TRIGGER,
        )

    return session_task


def pipeline_batch_trigger(pipeline: Pipeline, function_name: str) -> SessionBatchTrigger:
    """As ``pipeline_trigger``, for a pipeline that declares ``batch``: the extension's batch
    session trigger (``cardinality="many"``), each invocation up to host.json's
    ``maxMessageBatchSize`` messages of one session, in order, which the processor runs as a
    batch (``handle_batch``). The extension runs one such batch at a time per trigger and
    instance, whatever ``maxConcurrentSessions`` says (docs/processor.md, "Batches"): the
    pipeline's ``batch_triggers`` register as many, named ``function_name``. The host
    completes the messages the processor leaves to it (``completed_by_trigger``)."""

    @on_session_queue(
        pipeline,
        arg_name="messages",
        function_name=function_name,
        auto_complete=COMPLETED_BY_TRIGGER,
        cardinality=func.Cardinality.MANY,
    )
    def session_batch(
        messages: List[servicebus.ServiceBusReceivedMessage],  # noqa: UP006 (see the import)
        message_actions: servicebus.ServiceBusMessageActions,
    ) -> None:
        c = container()
        handle_session_batch(
            c.processor(pipeline.name),
            messages,
            message_actions,
            queue=c.settings.queue_of(pipeline.name),
            completed_by_trigger=COMPLETED_BY_TRIGGER,
        )

    return session_batch


# The triggers of each declared pipeline, by the pipeline's name: one trigger taking one
# message per invocation, or, for a pipeline that declares ``batch``, its ``batch_triggers``
# taking batches.
TRIGGERS: dict[str, SessionTrigger] = {
    p.name: pipeline_trigger(p) for p in app_pipelines().declared if not p.batch
}
BATCH_TRIGGERS: dict[str, tuple[SessionBatchTrigger, ...]] = {
    p.name: tuple(pipeline_batch_trigger(p, name) for name in p.function_names)
    for p in app_pipelines().declared
    if p.batch
}
