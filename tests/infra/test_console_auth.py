"""In Azure the operator console sits behind App Service Authentication (Entra ID), while the
HTTP API keeps its function keys: infra/app/console-auth.bicep, checked against the routes the
app really has."""

from __future__ import annotations

import json
import re
from typing import Any

import pycep

from tests.bindings.test_function_app import FUNCTIONS

from .conftest import INFRA

MODULE = INFRA / "app" / "console-auth.bicep"


def _auth_settings() -> dict[str, Any]:
    tree = pycep.BicepParser().parse(text=MODULE.read_text())
    (resource,) = [
        r for r in tree["resources"].values() if r["type"] == "Microsoft.Web/sites/config"
    ]
    assert resource["config"]["name"] == "authsettingsV2"
    assert resource["config"]["parent"] == "functionApp"
    return dict(resource["config"]["properties"])


def _excluded_paths(validation: dict[str, Any]) -> list[str]:
    loaded = validation["excludedPaths"]["function"]
    assert loaded["type"] == "load_json_content"
    return list(json.loads((MODULE.parent / loaded["parameters"]["file_path"]).read_text()))


def _excluded(path: str, patterns: list[str]) -> bool:
    """Easy Auth's rule: an exact path, or a prefix ending in '/*'."""
    return any(path == p or (p.endswith("/*") and path.startswith(p[:-1])) for p in patterns)


def _http_routes(auth_level: str) -> list[str]:
    """The app's routes of one auth level, as paths (each {parameter} filled in)."""
    routes = []
    for function in FUNCTIONS.values():
        (trigger,) = [b for b in function["bindings"] if b["type"] == "httpTrigger"] or [None]
        if trigger and trigger["authLevel"] == auth_level:
            routes.append("/" + re.sub(r"\{[^}]+\}", "some-id", trigger["route"]))
    return routes


def test_the_console_needs_an_entra_sign_in_and_unauthenticated_browsers_are_sent_to_it() -> None:
    settings = _auth_settings()
    assert settings["platform"]["enabled"] is True
    validation = settings["globalValidation"]
    assert validation["requireAuthentication"] is True
    assert validation["unauthenticatedClientAction"] == "RedirectToLoginPage"
    assert validation["redirectToProvider"] == "azureactivedirectory"
    entra = settings["identityProviders"]["azureActiveDirectory"]
    assert entra["enabled"] is True
    assert entra["registration"]["clientId"] == "clientId"  # the module's parameter
    assert entra["registration"]["openIdIssuer"].endswith("${tenantId}/v2.0")
    assert settings["httpSettings"]["requireHttps"] is True


def test_every_api_route_keeps_its_function_key_and_every_console_route_is_protected() -> None:
    patterns = _excluded_paths(_auth_settings()["globalValidation"])
    api = _http_routes("FUNCTION")
    console = _http_routes("ANONYMOUS")
    assert api and console
    assert [path for path in api if not _excluded(path, patterns)] == []
    assert all(path.split("/")[1] == "console" for path in console)
    assert [path for path in console if _excluded(path, patterns)] == []
    # The host's own endpoints take the master key or a system key, not a browser sign-in.
    assert _excluded("/admin/host/status", patterns)
    assert _excluded("/runtime/webhooks/eventgrid", patterns)
    assert not _excluded("/console", patterns)
    assert not _excluded("/console/sessions/some-id", patterns)


def test_main_deploys_easy_auth_when_the_console_has_an_app_registration() -> None:
    main = (INFRA / "main.bicep").read_text()
    module = re.search(
        r"module consoleAuth 'app/console-auth.bicep' = if \(!empty\(consoleAuthClientId\)\) "
        r"\{(.*?)\n\}",
        main,
        re.DOTALL,
    )
    assert module, "main.bicep deploys app/console-auth.bicep"
    assert "functionAppName: functionApp.outputs.name" in module.group(1)
    assert "clientId: consoleAuthClientId" in module.group(1)
    parameters = json.loads((INFRA / "main.parameters.json").read_text())["parameters"]
    assert parameters["consoleAuthClientId"]["value"] == "${CONSOLE_AUTH_CLIENT_ID=}"
