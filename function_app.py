"""The Functions app: creates the app, sets up logging and registers the blueprints.

Nothing else happens at import: clients are built on first use by ``shared.bootstrap``.

The Service Bus triggers use the SDK-type binding (azurefunctions-extensions-bindings-servicebus):
importing the package in the trigger module is all it needs, no app setting.
``PYTHON_ENABLE_INIT_INDEXING`` is for HTTP streaming, which this app does not use.
"""

import logging

import azure.functions as func

from shared.entrypoints import (
    archive_timer,
    bulk_http,
    console,
    exports_http,
    failed_sessions_http,
    imports_http,
    openapi_http,
    orders_http,
    overview_http,
    pipeline_controls_http,
    pipeline_http,
    purge_timer,
    replay_queue,
    session_queues,
)

logging.getLogger("azure").setLevel(logging.WARNING)  # the SDKs log every HTTP call at INFO

app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)
app.register_functions(orders_http.bp)
app.register_functions(session_queues.bp)
app.register_functions(pipeline_http.bp)
app.register_functions(archive_timer.bp)
app.register_functions(purge_timer.bp)
app.register_functions(failed_sessions_http.bp)
app.register_functions(bulk_http.bp)
app.register_functions(exports_http.bp)
app.register_functions(replay_queue.bp)
app.register_functions(imports_http.bp)
app.register_functions(overview_http.bp)
app.register_functions(pipeline_controls_http.bp)
app.register_functions(openapi_http.bp)
for console_blueprint in console.BLUEPRINTS:
    app.register_functions(console_blueprint)
