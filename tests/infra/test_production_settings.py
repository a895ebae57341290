"""The settings and roles that only matter once deployed (docs/deploy.md, "Production
settings"): trace sampling, the scale controller's right to read the queues' message counts, the
worker's thread pool, sized to host.json's concurrency."""

from __future__ import annotations

import json
import re

from localdev.derived_files import OTHER_INVOCATIONS

from .conftest import INFRA, ROOT

DATA_OWNER = "090c5cfd-751d-490a-894a-3ce6f1109419"  # Azure Service Bus Data Owner


def app_settings() -> dict[str, str]:
    text = (INFRA / "app" / "function.bicep").read_text()
    found = re.findall(r"^\s*\{ name: '([^']+)', value: '([^']*)' \}$", text, re.MULTILINE)
    return dict(found)


def local_example() -> dict[str, str]:
    values: dict[str, str] = json.loads((ROOT / "local.settings.json.example").read_text())[
        "Values"
    ]
    return values


def module_block(main: str, name: str) -> str:
    match = re.search(rf"^module {name} '[^']+'.*? = \{{\n(.*?)\n\}}", main, re.M | re.S)
    assert match, name
    return match.group(1)


def test_every_trace_is_kept_in_azure_and_locally() -> None:
    sampler = {
        "OTEL_TRACES_SAMPLER": "microsoft.fixed_percentage",
        "OTEL_TRACES_SAMPLER_ARG": "1.0",
    }
    settings, local = app_settings(), local_example()
    assert {name: settings.get(name) for name in sampler} == sampler
    assert {name: local.get(name) for name in sampler} == sampler


def test_the_app_identity_may_read_the_session_queues_message_counts_and_no_more() -> None:
    roles = (INFRA / "app" / "rbac" / "servicebus-role.bicep").read_text()
    # Data Owner (Manage rights: GetQueueRuntimePropertiesAsync) ...
    assert f"var manage = '{DATA_OWNER}' // Azure Service Bus Data Owner" in roles
    assignment = re.search(
        r"^resource scaleAssignments '[^']+' = \[for \(queueName, i\) in scaledQueueNames: \{\n"
        r"(.*?)\n\}\]",
        roles,
        re.M | re.S,
    )
    assert assignment, "the Data Owner assignment"
    # ... scoped to each scaled queue, never to the namespace ...
    assert "scope: scaledQueues[i]" in assignment.group(1)
    definition = "subscriptionResourceId('Microsoft.Authorization/roleDefinitions', manage)"
    assert f"roleDefinitionId: {definition}" in assignment.group(1)
    namespace_roles = re.search(r"^var roles = \{\n(.*?)\n\}", roles, re.M | re.S)
    assert namespace_roles and DATA_OWNER not in namespace_roles.group(1)
    # ... on every session queue infra creates, for the app's identity only.
    main = (INFRA / "main.bicep").read_text()
    assert "scaledQueueNames: serviceBus.outputs.queueNames" in module_block(
        main, "appServiceBusRoles"
    )
    assert "scaledQueueNames" not in module_block(main, "developerServiceBusRoles")
    servicebus = (INFRA / "app" / "servicebus.bicep").read_text()
    assert re.search(r"^output queueNames array = queueNames$", servicebus, re.M)
    assert re.search(r"^\s+requiresSession: true$", servicebus, re.M)


def session_queues() -> list[str]:
    """The session queues (infra/local/config.json mirrors infra's; test_emulator_config.py)."""
    config = json.loads((INFRA / "local" / "config.json").read_text())
    (namespace,) = config["UserConfig"]["Namespaces"]
    return [q["Name"] for q in namespace["Queues"] if q["Properties"]["RequiresSession"]]


def test_the_worker_has_a_thread_for_every_invocation_host_json_allows_at_once() -> None:
    host = json.loads((ROOT / "host.json").read_text())
    sessions = host["extensions"]["serviceBus"]["maxConcurrentSessions"]
    # Each session trigger (one per queue) runs up to maxConcurrentSessions invocations at once.
    needed = len(session_queues()) * sessions + OTHER_INVOCATIONS
    rule = f"{len(session_queues())} session queues x {sessions} sessions + {OTHER_INVOCATIONS}"
    # function.bicep reads the count from infra/app-resources.json (localdev.derived writes it)
    function = (INFRA / "app" / "function.bicep").read_text()
    reads = "value: string(loadJsonContent('../app-resources.json').threadCount)"
    assert f"{{ name: 'PYTHON_THREADPOOL_THREAD_COUNT', {reads} }}" in function
    resources = json.loads((INFRA / "app-resources.json").read_text())
    assert resources["threadCount"] == needed, rule
    assert int(local_example()["PYTHON_THREADPOOL_THREAD_COUNT"]) == needed, rule
