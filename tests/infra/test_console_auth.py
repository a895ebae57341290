"""In Azure the operator console sits behind App Service Authentication (Entra ID), while the
HTTP API keeps its function keys: infra/app/console-auth.bicep, checked against the routes the
app really has."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pycep

from shared.domain.roles import APP_ROLES, role_named
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
        r"module consoleAuth 'app/console-auth.bicep' = "
        r"if \(!empty\(consoleAuthClientId\) \|\| createConsoleApp\) \{(.*?)\n\}",
        main,
        re.DOTALL,
    )
    assert module, "main.bicep deploys app/console-auth.bicep"
    assert "functionAppName: functionApp.outputs.name" in module.group(1)
    # The registration made here (with its app roles), else the one given.
    assert (
        "clientId: createConsoleApp ? consoleApp.outputs.clientId : consoleAuthClientId"
        in module.group(1)
    )
    assert re.search(r"module consoleApp 'app/console-app.bicep' = if \(createConsoleApp\)", main)
    parameters = json.loads((INFRA / "main.parameters.json").read_text())["parameters"]
    assert parameters["consoleAuthClientId"]["value"] == "${CONSOLE_AUTH_CLIENT_ID=}"
    assert parameters["createConsoleApp"]["value"] == "${CREATE_CONSOLE_APP=false}"


ROLES_FILE = INFRA / "app" / "console-roles.json"


def test_the_app_registration_declares_the_roles_the_console_checks() -> None:
    declared = json.loads(ROLES_FILE.read_text())
    assert {role["value"]: role_named(role["value"].split(".")[1]) for role in declared} == (
        APP_ROLES
    )
    assert len({uuid.UUID(role["id"]) for role in declared}) == len(declared)
    for role in declared:
        assert role["allowedMemberTypes"] == ["User"] and role["isEnabled"] is True
        assert role["displayName"] and role["description"]


def test_only_people_given_a_role_can_sign_in_to_the_console() -> None:
    tree = pycep.BicepParser().parse(text=(INFRA / "app" / "console-app.bicep").read_text())
    assert "microsoftGraphV1" in tree["extensions"]
    resources = {r["type"]: r["config"] for r in tree["resources"].values()}
    application = resources["Microsoft.Graph/applications"]
    loaded = application["appRoles"]["function"]
    assert loaded["type"] == "load_json_content"
    assert loaded["parameters"]["file_path"] == ROLES_FILE.name
    assert application["signInAudience"] == "AzureADMyOrg"
    assert application["web"]["implicitGrantSettings"]["enableIdTokenIssuance"] is True
    [redirect] = application["web"]["redirectUris"]
    assert redirect.endswith(".azurewebsites.net/.auth/login/aad/callback")
    principal = resources["Microsoft.Graph/servicePrincipals"]
    assert principal["appRoleAssignmentRequired"] is True  # no role, no sign-in
    accessor = principal["appId"]["operator"]
    assert accessor["operands"] == {"operand_1": "consoleApp", "operand_2": "appId"}
    # The registration's id is what Easy Auth validates sign-ins against.
    assert re.search(r"^output clientId string = consoleApp.appId$", _text("console-app"), re.M)
    bicepconfig = json.loads((INFRA / "bicepconfig.json").read_text())
    assert bicepconfig["extensions"]["microsoftGraphV1"].startswith(
        "br:mcr.microsoft.com/bicep/extensions/microsoftgraph/v1.0:"
    )


def _text(module: str) -> str:
    return (INFRA / "app" / f"{module}.bicep").read_text()
