"""Per role, each operator action is allowed or refused: a refusal is a 403 that names the role
needed, and nothing is done (the session stays failed, nothing is sent or queued) and nothing is
audited. Through the API (a function key, its role from KEY_ROLES) and the console (locally a
key in a cookie; behind App Service Authentication the app roles of the signed-in user's
claims). The archive, audit trail, replay queue and tokens are real (Azurite)."""

from __future__ import annotations

import base64
import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import azure.functions as func
import pytest

from shared.domain.audit import key_holder
from shared.domain.roles import Role, key_digest
from shared.entrypoints.bulk_http import confirm_bulk, get_replay, preview_bulk, request_replay
from shared.entrypoints.console.access import csrf_token_for
from shared.entrypoints.console.actions import console_edit, console_replay, console_resolve
from shared.entrypoints.console.bulk import console_bulk_preview
from shared.entrypoints.console.pages import console_overview, console_session
from shared.entrypoints.console.records import console_audit, console_export_sessions
from shared.entrypoints.exports_http import export_failed_sessions_csv, get_audit
from shared.entrypoints.failed_sessions_http import (
    edit_and_replay_session,
    failed_session_history,
    get_failed_session,
    list_failed_sessions,
    replay_failed_session,
    resolve_failed_session,
)
from shared.entrypoints.overview_http import get_overview
from shared.entrypoints.roles import required_role
from tests.builders import order_document

from .conftest import StorageApp
from .test_dead_letters import failed_session, run_timer
from .test_function_app import FUNCTIONS, USER_FUNCTIONS

pytestmark = pytest.mark.integration

KEYS: dict[Role | None, str] = {
    None: "a-key-with-no-role",
    **{role: f"a-{role.name.lower()}-key" for role in Role},
}
SESSION = "order-1"
BASE = "http://localhost:7071"


@pytest.fixture
def app(storage_app: StorageApp) -> StorageApp:
    """One failed purchase session; three keys with a role each, the default role none."""
    settings = storage_app.container.settings
    access = dataclasses.replace(
        settings.console,
        key_roles={key_digest(KEYS[role]): role for role in Role},
        default_key_role=None,
        keys=frozenset({KEYS[None]}),  # a host key, so the console lets it in, with no role
    )
    storage_app.container.override(settings=dataclasses.replace(settings, console=access))
    failed_session(storage_app, SESSION)
    run_timer()
    return storage_app


def _api(function: Any, path: str, key: str, *, body: Any = None, **route: str) -> Any:
    headers = {"x-functions-key": key, "Idempotency-Key": "k-1"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    return function(
        func.HttpRequest(
            method="POST" if body is not None or path.endswith("replay") else "GET",
            url=f"{BASE}/api/{path}",
            headers=headers,
            params={},
            route_params=route,
            body=json.dumps(body).encode() if body is not None else b"",
        )
    )


def _edit_body(app: StorageApp) -> dict[str, Any]:
    row = app.container.archive.list_session(SESSION)[0]
    first = json.loads(row.body)
    edited = {**first, "payload": order_document()}  # the order the payload should have held
    return {"note": "the whole order", "messages": {row.row_key: edited}}


# Each API action: (its function's call, the role it needs).
API_ACTIONS: dict[str, tuple[Callable[[StorageApp, str], Any], Role]] = {
    "list": (lambda app, k: _api(list_failed_sessions, "failed-sessions", k), Role.READER),
    "inspect": (
        lambda app, k: _api(
            get_failed_session, f"failed-sessions/{SESSION}", k, session_id=SESSION
        ),
        Role.READER,
    ),
    "overview": (lambda app, k: _api(get_overview, "overview", k), Role.READER),
    "audit": (lambda app, k: _api(get_audit, "audit", k), Role.READER),
    "export": (
        lambda app, k: _api(export_failed_sessions_csv, "exports/failed-sessions", k),
        Role.READER,
    ),
    "replay": (
        lambda app, k: _api(
            replay_failed_session, f"failed-sessions/{SESSION}/replay", k, session_id=SESSION
        ),
        Role.OPERATOR,
    ),
    "resolve": (
        lambda app, k: _api(
            resolve_failed_session,
            f"failed-sessions/{SESSION}/resolve",
            k,
            body={"note": "dup"},
            session_id=SESSION,
        ),
        Role.OPERATOR,
    ),
    "bulk-replay": (
        lambda app, k: _api(request_replay, "replays", k, body={"task": "ProcessPayment"}),
        Role.OPERATOR,
    ),
    "bulk-preview": (
        lambda app, k: _api(
            preview_bulk, "bulk-previews", k, body={"action": "resolve", "task": "ProcessPayment"}
        ),
        Role.OPERATOR,
    ),
    "edit-and-replay": (
        lambda app, k: _api(
            edit_and_replay_session,
            f"failed-sessions/{SESSION}/edit-and-replay",
            k,
            body=_edit_body(app),
            session_id=SESSION,
        ),
        Role.EDITOR,
    ),
}


def _nothing_done(app: StorageApp) -> None:
    assert app.container.archive.get_summary(SESSION).status == "failed"
    assert app.resender.sent == []
    assert app.replay_queue.peek_messages() == []
    assert app.container.audit_trail.history(SESSION) == []


@pytest.mark.parametrize("role", list(KEYS), ids=lambda r: r.label if r else "no-role")
@pytest.mark.parametrize("action", list(API_ACTIONS))
def test_each_api_action_is_allowed_from_its_role_up_and_refused_below_it(
    app: StorageApp, action: str, role: Role | None
) -> None:
    call, needed = API_ACTIONS[action]

    response = call(app, KEYS[role])

    if role is not None and role >= needed:
        assert response.status_code in (200, 201, 202), response.get_body()
        return
    assert response.status_code == 403
    problem = json.loads(response.get_body())
    assert problem["required_role"] == needed.label
    assert problem["role"] == (role.label if role else None)
    assert key_holder(KEYS[role]) in problem["detail"] and "Nothing was done" in problem["detail"]
    _nothing_done(app)


def test_a_confirmation_needs_an_operator_too(app: StorageApp) -> None:
    preview = _api(
        preview_bulk,
        "bulk-previews",
        KEYS[Role.OPERATOR],
        body={"action": "resolve", "task": "ProcessPayment"},
    )
    token = json.loads(preview.get_body())["token"]
    body = {"action": "resolve", "token": token, "note": "refunded"}

    refused = _api(confirm_bulk, "bulk-actions", KEYS[Role.READER], body=body)
    started = _api(confirm_bulk, "bulk-actions", KEYS[Role.OPERATOR], body=body)

    assert refused.status_code == 403 and started.status_code == 202  # the token was not used
    request_id = json.loads(started.get_body())["request_id"]
    status = _api(get_replay, f"replays/{request_id}", KEYS[Role.READER], request_id=request_id)
    assert json.loads(status.get_body())["role"] == "Operator"


def test_every_audit_entry_names_the_caller_and_the_role_it_acted_with(app: StorageApp) -> None:
    response = API_ACTIONS["edit-and-replay"][0](app, KEYS[Role.EDITOR])
    assert response.status_code == 202

    history = _api(
        failed_session_history,
        f"failed-sessions/{SESSION}/history",
        KEYS[Role.READER],
        session_id=SESSION,
    )
    [entry] = json.loads(history.get_body())["entries"]
    assert (entry["who"], entry["role"]) == (key_holder(KEYS[Role.EDITOR]), "Editor")


# -- the console ------------------------------------------------------------------------------


def _console(
    function: Any, path: str, key: str, *, form: dict[str, str] | None = None, **route: str
) -> Any:
    headers = {"Cookie": f"console_key={key}"}
    body = b""
    if form is not None:
        form = {"csrf_token": csrf_token_for(key), "action_id": "a" * 32, **form}
        body = urlencode(form).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    return function(
        func.HttpRequest(
            method="POST" if form is not None else "GET",
            url=f"{BASE}/console/{path}",
            headers=headers,
            params={},
            route_params=route,
            body=body,
        )
    )


CONSOLE_ACTIONS: dict[str, tuple[Callable[[str], Any], Role]] = {
    "overview": (lambda k: _console(console_overview, "", k), Role.READER),
    "session": (
        lambda k: _console(console_session, f"sessions/{SESSION}", k, session_id=SESSION),
        Role.READER,
    ),
    "audit": (lambda k: _console(console_audit, "audit", k), Role.READER),
    "export": (
        lambda k: _console(console_export_sessions, "exports/failed-sessions", k),
        Role.READER,
    ),
    "replay": (
        lambda k: _console(
            console_replay, f"sessions/{SESSION}/replay", k, form={}, session_id=SESSION
        ),
        Role.OPERATOR,
    ),
    "resolve": (
        lambda k: _console(
            console_resolve,
            f"sessions/{SESSION}/resolve",
            k,
            form={"note": "dup"},
            session_id=SESSION,
        ),
        Role.OPERATOR,
    ),
    "bulk-preview": (
        lambda k: _console(
            console_bulk_preview,
            "bulk/preview",
            k,
            form={"action": "replay", "task": "ProcessPayment"},
        ),
        Role.OPERATOR,
    ),
    "edit-page": (
        lambda k: _console(console_edit, f"sessions/{SESSION}/edit", k, session_id=SESSION),
        Role.EDITOR,
    ),
}


@pytest.mark.parametrize("role", list(KEYS), ids=lambda r: r.label if r else "no-role")
@pytest.mark.parametrize("action", list(CONSOLE_ACTIONS))
def test_each_console_action_is_allowed_from_its_role_up_and_refused_below_it(
    app: StorageApp, action: str, role: Role | None
) -> None:
    call, needed = CONSOLE_ACTIONS[action]

    response = call(KEYS[role])

    if role is not None and role >= needed:
        assert response.status_code in (200, 303), response.get_body()[:500]
        return
    assert response.status_code == 403
    page = response.get_body().decode()
    assert "Your role does not allow this" in page and f"needs the role {needed.label}" in page
    _nothing_done(app)


def test_a_console_page_shows_only_the_actions_the_role_allows(app: StorageApp) -> None:
    def page(role: Role) -> str:
        call, _ = CONSOLE_ACTIONS["session"]
        return str(call(KEYS[role]).get_body().decode())

    reader, operator, editor = page(Role.READER), page(Role.OPERATOR), page(Role.EDITOR)

    assert "Replay this session" not in reader and "(Reader)" in reader
    assert "Replay this session" in operator and "Edit messages and replay" not in operator
    assert "Edit messages and replay" in editor


def _principal(name: str, *roles: str) -> dict[str, str]:
    claims = [{"typ": "roles", "val": role} for role in roles]
    claims.append({"typ": "name", "val": name})
    document = {"auth_typ": "aad", "claims": claims, "name_typ": "name", "role_typ": "roles"}
    return {
        "x-ms-client-principal-name": name,
        "x-ms-client-principal": base64.b64encode(json.dumps(document).encode()).decode(),
    }


def test_behind_easy_auth_the_app_roles_of_the_sign_in_decide(app: StorageApp) -> None:
    settings = app.container.settings
    app.container.override(
        settings=dataclasses.replace(
            settings, console=dataclasses.replace(settings.console, easy_auth=True)
        )
    )

    def replay(*roles: str) -> Any:
        headers = {**_principal("ada@example.com", *roles), "Cookie": "console_csrf=" + "c" * 40}
        form = urlencode({"csrf_token": "c" * 40, "action_id": "b" * 32}).encode()
        return console_replay(
            func.HttpRequest(
                method="POST",
                url=f"{BASE}/console/sessions/{SESSION}/replay",
                headers={**headers, "Content-Type": "application/x-www-form-urlencoded"},
                params={},
                route_params={"session_id": SESSION},
                body=form,
            )
        )

    assert replay().status_code == 403  # signed in, no app role
    assert replay("Console.Reader", "SomethingElse").status_code == 403
    _nothing_done(app)
    assert replay("Console.Reader", "Console.Operator").status_code == 303
    [entry] = app.container.audit_trail.history(SESSION)
    assert (entry.who, entry.role) == ("ada@example.com", "Operator")


def test_the_routes_declare_the_roles_these_tests_expect() -> None:
    for function, role in (
        (replay_failed_session, Role.OPERATOR),
        (edit_and_replay_session, Role.EDITOR),
        (list_failed_sessions, Role.READER),
        (console_edit, Role.EDITOR),
    ):
        assert required_role(function) == role


# -- docs/console.md's table of roles -------------------------------------------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs" / "console.md"
# Routes of other modules that join the table when they are merged (docs/console.md lists them).
DOCUMENTED_AHEAD = {
    "POST /api/pipelines/{pipeline}/pause",
    "POST /api/pipelines/{pipeline}/resume",
}


def effective_roles() -> dict[str, str]:
    """Every HTTP route of the app, "<METHODS> /<route>", with the role it needs: the one it
    declares, else for a console view Reader to read and Operator to act, else (the business
    routes: orders, imports, pipelines' jobs) any function key."""
    found = {}
    for name, function in USER_FUNCTIONS.items():
        [trigger] = [b for b in FUNCTIONS[name]["bindings"] if b["type"].endswith("Trigger")]
        if trigger["type"] != "httpTrigger":
            continue
        route = f"{', '.join(sorted(trigger['methods']))} /{trigger['route']}"
        declared = required_role(function)
        if declared is not None:
            found[route] = declared.label
        elif name in ("console_sign_in", "console_static"):
            found[route] = "anyone"
        elif name == "console_sign_out":
            found[route] = "any role"
        elif trigger["authLevel"] == "ANONYMOUS":
            found[route] = "Reader" if trigger["methods"] == ["GET"] else "Operator"
        else:
            found[route] = "any function key"
    return found


def documented_roles() -> dict[str, str]:
    section = DOCS.read_text().split("\n## Roles\n", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `([A-Z, ]+ /[^`]+)` \| ([A-Za-z ]+) \|", section, re.M))


def test_docs_console_md_lists_the_role_of_every_route() -> None:
    documented = documented_roles()
    assert {r: documented.get(r) for r in effective_roles()} == effective_roles()
    assert set(documented) - set(effective_roles()) <= DOCUMENTED_AHEAD
    assert all(documented[r] == "Operator" for r in DOCUMENTED_AHEAD)
