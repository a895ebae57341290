"""Service Bus trigger of the product import pipeline (session-enabled, settled by the app)."""

from __future__ import annotations

import azure.functions as func
import azurefunctions.extensions.bindings.servicebus as servicebus

from ..bootstrap import container
from .session_tasks import handle_session_message

bp = func.Blueprint()


@bp.service_bus_queue_trigger(
    arg_name="message",
    queue_name="%IMPORT_QUEUE_NAME%",
    connection="ServiceBusConnection",
    is_sessions_enabled=True,
    auto_complete_messages=False,
)
def product_import_tasks(
    message: servicebus.ServiceBusReceivedMessage,
    message_actions: servicebus.ServiceBusMessageActions,
    context: func.Context,
) -> None:
    c = container()
    handle_session_message(
        c.import_processor,
        message,
        message_actions,
        queue=c.settings.import_queue_name,
        trace_context=context.trace_context,
    )
