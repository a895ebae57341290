"""Telemetry in Azure as the Functions OpenTelemetry guidance has it: the host in
``telemetryMode`` OpenTelemetry, the Python worker exporting the app's telemetry with the Azure
Monitor distro, to an Application Insights component that takes Entra auth only, with the
app's own managed identity."""

from __future__ import annotations

import json
import re

from .conftest import INFRA, ROOT


def app_settings() -> dict[str, str]:
    text = (INFRA / "app" / "function.bicep").read_text()
    return dict(re.findall(r"^\s*\{ name: '([^']+)', value: (.+) \}$", text, re.MULTILINE))


def test_the_host_exports_opentelemetry_and_keeps_no_settings_that_mode_ignores() -> None:
    host = json.loads((ROOT / "host.json").read_text())
    assert host["telemetryMode"] == "OpenTelemetry"
    # logging.applicationInsights does not apply in OpenTelemetry mode.
    assert "applicationInsights" not in host.get("logging", {})


def test_the_worker_exports_to_application_insights_with_the_apps_identity() -> None:
    settings = app_settings()
    assert settings["APPLICATIONINSIGHTS_CONNECTION_STRING"] == "appInsightsConnectionString"
    assert settings["PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY"] == "'true'"
    # The distro's format: a managed identity's client id and Authorization=AAD.
    authentication = settings["APPLICATIONINSIGHTS_AUTHENTICATION_STRING"].strip("'")
    pairs = dict(pair.split("=", 1) for pair in authentication.split(";"))
    assert pairs == {"ClientId": "${identityClientId}", "Authorization": "AAD"}
    # ... the same identity every other connection of the app uses.
    assert settings["ServiceBusConnection__clientId"] == "identityClientId"


def test_the_component_takes_entra_auth_only_and_the_identity_may_publish() -> None:
    monitoring = (INFRA / "app" / "monitoring.bicep").read_text()
    assert re.search(r"^\s+DisableLocalAuth: true$", monitoring, re.MULTILINE)
    main = (INFRA / "main.bicep").read_text()
    roles = re.search(r"module monitoringRoles '[^']+' = \{(.*?)\n\}", main, re.DOTALL)
    assert roles is not None
    assert "principalId: identity.outputs.principalId" in roles.group(1)
    publisher = (INFRA / "app" / "rbac" / "monitoring-role.bicep").read_text()
    assert "3913510d-42f4-4e42-8a64-420c390055eb" in publisher  # Monitoring Metrics Publisher


def test_the_app_ships_the_distro_the_worker_loads() -> None:
    requirements = (ROOT / "requirements.txt").read_text()
    assert re.search(r"^azure-monitor-opentelemetry[<>=]", requirements, re.MULTILINE)
