"""The contract the Functions host reads from the app: names, triggers and settings names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import azure.functions as func

from tests.bindings.indexed_app import INDEXED
from tests.builders import PIPELINES

FUNCTIONS = {str(f.get_function_name()): json.loads(f.get_function_json()) for f in INDEXED}
# Each function's Python function, as the worker calls it.
USER_FUNCTIONS = {str(f.get_function_name()): f.get_user_function() for f in INDEXED}


def _functions() -> dict[str, dict[str, Any]]:
    return FUNCTIONS


def _trigger(name: str) -> dict[str, Any]:
    (trigger,) = [b for b in _functions()[name]["bindings"] if b["type"].endswith("Trigger")]
    return trigger


# name -> (route, methods) of every HTTP function; all take a function key.
HTTP_ROUTES = {
    "submit_order_http": ("api/orders", ["POST"]),
    "get_order": ("api/orders/{job_id}", ["GET"]),
    "list_failed_sessions": ("api/failed-sessions", ["GET"]),
    "failed_session_groups": ("api/failed-session-groups", ["GET"]),
    "get_failed_session": ("api/failed-sessions/{session_id}", ["GET"]),
    "replay_failed_session": ("api/failed-sessions/{session_id}/replay", ["POST"]),
    "request_replay": ("api/replays", ["POST"]),
    "get_replay": ("api/replays/{request_id}", ["GET"]),
    "get_import": ("api/imports/{job_id}", ["GET"]),
    "get_order_by_number": ("api/order-numbers/{order_number}", ["GET"]),
    "failed_session_fingerprints": ("api/failed-session-fingerprints", ["GET"]),
    "failed_session_fingerprint": ("api/failed-session-fingerprints/{fingerprint}", ["GET"]),
    "failed_session_history": ("api/failed-sessions/{session_id}/history", ["GET"]),
    "edit_and_replay_session": ("api/failed-sessions/{session_id}/edit-and-replay", ["POST"]),
    "resolve_failed_session": ("api/failed-sessions/{session_id}/resolve", ["POST"]),
    "preview_bulk": ("api/bulk-previews", ["POST"]),
    "confirm_bulk": ("api/bulk-actions", ["POST"]),
    "get_overview": ("api/overview", ["GET"]),
    "list_pipelines": ("api/pipelines", ["GET"]),
    "get_pipeline": ("api/pipelines/{pipeline}", ["GET"]),
    "pause_pipeline": ("api/pipelines/{pipeline}/pause", ["POST"]),
    "resume_pipeline": ("api/pipelines/{pipeline}/resume", ["POST"]),
    "get_openapi": ("api/openapi.json", ["GET"]),
    "export_failed_sessions_csv": ("api/exports/failed-sessions", ["GET"]),
    "get_audit": ("api/audit", ["GET"]),
    "export_audit_csv": ("api/exports/audit", ["GET"]),
}


# name -> (route, methods) of the operator console's pages: anonymous to the host, because the
# console lets people in itself (a key in a cookie locally, App Service Authentication in Azure).
CONSOLE_ROUTES = {
    "console_overview": ("console", ["GET"]),
    "console_failures": ("console/failures", ["GET"]),
    "console_sessions": ("console/sessions", ["GET"]),
    "console_session": ("console/sessions/{session_id}", ["GET"]),
    "console_sign_in": ("console/sign-in", ["GET", "POST"]),
    "console_sign_out": ("console/sign-out", ["POST"]),
    "console_static": ("console/static/{name}", ["GET"]),
    "console_replay": ("console/sessions/{session_id}/replay", ["POST"]),
    "console_edit": ("console/sessions/{session_id}/edit", ["GET", "POST"]),
    "console_resolve": ("console/sessions/{session_id}/resolve", ["POST"]),
    "console_pause": ("console/pipelines/{pipeline}/pause", ["POST"]),
    "console_resume": ("console/pipelines/{pipeline}/resume", ["POST"]),
    "console_bulk_preview": ("console/bulk/preview", ["POST"]),
    "console_bulk_confirm": ("console/bulk", ["POST"]),
    "console_bulk_progress": ("console/bulk/{request_id}", ["GET"]),
    "console_order": ("console/orders", ["GET"]),
    "console_find_job": ("console/jobs", ["GET"]),
    "console_jobs": ("console/jobs/{pipeline}", ["GET"]),
    "console_job": ("console/jobs/{pipeline}/{job_id}", ["GET"]),
    "console_import": ("console/imports/{job_id}", ["GET"]),
    "console_audit": ("console/audit", ["GET"]),
    "console_export_audit": ("console/exports/audit", ["GET"]),
    "console_export_sessions": ("console/exports/failed-sessions", ["GET"]),
}


# name -> (route, methods) of the start and status routes of each declared pipeline that has a
# route and no module of its own (shared/entrypoints/pipeline_http.py).
PIPELINE_ROUTES = {
    name: value
    for p in PIPELINES
    if p.route is not None and not p.own_routes
    for name, value in (
        (f"start_{p.name}", (f"api/{p.route}", ["POST"])),
        (f"get_{p.name}_job", (f"api/{p.route}/{{job_id}}", ["GET"])),
    )
}


def test_the_app_has_every_blueprint_registered() -> None:
    assert set(_functions()) == {
        *HTTP_ROUTES,
        *PIPELINE_ROUTES,
        *CONSOLE_ROUTES,
        "purchase_tasks",
        "product_import_tasks",
        *(name for p in PIPELINES for name in p.function_names),
        "archive_dead_letters",
        "purge_expired_records",
        "replay_requests",
    }


def test_each_declared_route_is_served_so_a_replays_status_url_answers() -> None:
    served = {
        (trigger["route"], method)
        for function in _functions().values()
        for trigger in function["bindings"]
        if trigger["type"] == "httpTrigger"
        for method in trigger["methods"]
    }
    for pipeline in PIPELINES:
        if pipeline.route is not None:
            assert (f"api/{pipeline.route}/{{job_id}}", "GET") in served, pipeline.name


def test_each_declared_pipeline_has_a_session_trigger_on_its_queue_setting() -> None:
    for pipeline in PIPELINES:
        for name in pipeline.function_names:
            trigger = _trigger(name)
            assert trigger["type"] == "serviceBusTrigger"
            assert trigger["queueName"] == f"%{pipeline.queue_setting}%"
            assert trigger["connection"] == "ServiceBusConnection"
            # Every trigger leaves the completion of a completed task's message to the host.
            assert (trigger["isSessionsEnabled"], trigger["autoCompleteMessages"]) == (True, True)
            assert trigger.get("cardinality", "one").lower() == (
                "many" if pipeline.batch else "one"
            )


def test_the_import_holds_several_sessions_at_once_with_a_trigger_for_each() -> None:
    # The extension's batch loop holds one session at a time per trigger and instance.
    [import_pipeline] = [p for p in PIPELINES if p.name == "product_import"]
    assert import_pipeline.batch_triggers > 1
    assert import_pipeline.function_names == (
        "product_import_tasks",
        *(f"product_import_tasks_{n}" for n in range(2, import_pipeline.batch_triggers + 1)),
    )


def test_the_triggers_take_sessions_and_leave_completions_to_the_host() -> None:
    for name, queue_setting, argument, cardinality in (
        ("purchase_tasks", "%PURCHASE_QUEUE_NAME%", "message", "one"),
        ("product_import_tasks", "%IMPORT_QUEUE_NAME%", "messages", "many"),  # batches
    ):
        trigger = _trigger(name)
        assert trigger["type"] == "serviceBusTrigger"
        assert trigger["name"] == argument
        assert trigger.get("cardinality", "one").lower() == cardinality
        assert trigger["queueName"] == queue_setting  # a setting's name, never a value
        assert trigger["connection"] == "ServiceBusConnection"
        assert trigger["isSessionsEnabled"] is True
        assert trigger["autoCompleteMessages"] is True


def test_message_actions_is_not_a_binding_but_an_annotated_parameter() -> None:
    # The worker injects ServiceBusMessageActions from the annotation; the host sees only
    # the trigger.
    for name, argument in (("purchase_tasks", "message"), ("product_import_tasks", "messages")):
        assert [b["name"] for b in _functions()[name]["bindings"]] == [argument]


def test_host_json_sets_no_route_prefix_so_routes_carry_their_own() -> None:
    # The API's routes are api/..., the console's console/...: their URLs are /api/... and
    # /console/..., so the console's cookie and Easy Auth's rule can be scoped to /console.
    host = json.loads((Path(__file__).parents[2] / "host.json").read_text())
    assert host["extensions"]["http"]["routePrefix"] == ""
    routes = [t["route"] for f in _functions().values() for t in f["bindings"] if "route" in t]
    assert routes and all(r.split("/")[0] in ("api", "console") for r in routes)


def test_orders_is_a_function_key_post_only_route() -> None:
    trigger = _trigger("submit_order_http")
    assert trigger["type"] == "httpTrigger"
    assert trigger["route"] == "api/orders"
    assert trigger["methods"] == ["POST"]
    assert trigger["authLevel"] == func.AuthLevel.FUNCTION.name


def test_every_http_function_is_a_function_key_route_with_its_methods() -> None:
    for name, (route, methods) in {**HTTP_ROUTES, **PIPELINE_ROUTES}.items():
        trigger = _trigger(name)
        assert trigger["type"] == "httpTrigger", name
        assert (trigger["route"], trigger["methods"]) == (route, methods), name
        assert trigger["authLevel"] == func.AuthLevel.FUNCTION.name, name


def test_the_console_routes_are_anonymous_to_the_host_and_live_under_console() -> None:
    for name, (route, methods) in CONSOLE_ROUTES.items():
        trigger = _trigger(name)
        assert trigger["type"] == "httpTrigger", name
        assert (trigger["route"], sorted(trigger["methods"])) == (route, methods), name
        assert trigger["authLevel"] == func.AuthLevel.ANONYMOUS.name, name


def test_the_purge_timer_runs_on_a_schedule_setting() -> None:
    trigger = _trigger("purge_expired_records")
    assert trigger["type"] == "timerTrigger"
    assert trigger["schedule"] == "%PURGE_SCHEDULE%"
    assert trigger["useMonitor"] is True


def test_the_archive_timer_runs_on_a_schedule_setting() -> None:
    trigger = _trigger("archive_dead_letters")
    assert trigger["type"] == "timerTrigger"
    assert trigger["schedule"] == "%DLQ_ARCHIVE_SCHEDULE%"
    assert trigger["useMonitor"] is True


def test_bulk_replays_come_from_the_storage_queue_setting() -> None:
    trigger = _trigger("replay_requests")
    assert trigger["type"] == "queueTrigger"
    assert trigger["queueName"] == "%REPLAY_QUEUE_NAME%"
    assert trigger["connection"] == "AzureWebJobsStorage"


def test_the_function_app_does_not_import_the_spark_jobs_it_is_deployed_without() -> None:
    # .funcignore leaves spark_jobs/ out of the package: importing it would fail in Azure.
    import subprocess
    import sys

    code = "import sys; sys.modules['spark_jobs'] = None; sys.modules['pyspark'] = None\n"
    code += "import function_app\n"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])


def test_the_readme_documents_every_http_route_with_a_curl_example() -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    section = readme.split("## HTTP API", 1)[1].split("\n## ", 1)[0]
    for name, (route, methods) in HTTP_ROUTES.items():
        assert f"{methods[0]} /{route}" in section, name
        first = route.removeprefix("api/").split("/{", 1)[0]
        assert f"$API/{first}" in section, f"{name} has no curl example"
