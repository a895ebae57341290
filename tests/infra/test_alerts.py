"""The alerts that wake someone (infra/app/alerts.bicep): each rule exists with its condition,
every one notifies the one action group, whose e-mail is a parameter, and their thresholds are
the ones the app's overview uses locally (the ALERT_* settings, from the same main.bicep
parameters)."""

from __future__ import annotations

import re
from typing import Any

import pycep

from .conftest import INFRA

MODULE = INFRA / "app" / "alerts.bicep"


def _tree() -> dict[str, Any]:
    return dict(pycep.BicepParser().parse(text=MODULE.read_text()))


def _rules() -> dict[str, dict[str, Any]]:
    return {name: r["config"] for name, r in _tree()["resources"].items() if not r["existing"]}


def _notifies_the_action_group(properties: dict[str, Any]) -> bool:
    actions = properties["actions"]
    ids = (
        [a["actionGroupId"] for a in actions]
        if isinstance(actions, list)
        else actions["actionGroups"]
    )
    accessor = {"operand_1": "actionGroup", "operand_2": "id"}
    return bool(ids) and all(i["operator"]["operands"] == accessor for i in ids)


def _query_criterion(rule: dict[str, Any]) -> dict[str, Any]:
    [criterion] = rule["properties"]["criteria"]["allOf"]
    assert rule["kind"] == "LogAlert"
    scope = rule["properties"]["scopes"][0]["operator"]["operands"]
    assert scope == {"operand_1": "appInsights", "operand_2": "id"}  # the app's telemetry
    return dict(criterion)


def test_one_action_group_e_mails_the_address_given_as_a_parameter() -> None:
    tree = _tree()
    group = _rules()["actionGroup"]
    [receiver] = group["properties"]["emailReceivers"]
    assert receiver["emailAddress"] == "alertEmail"
    assert tree["parameters"]["alertEmail"]["type"] == "string"
    assert group["properties"]["enabled"] is True
    for name, rule in _rules().items():
        if name != "actionGroup":
            assert rule["properties"]["enabled"] is True, name
            assert _notifies_the_action_group(rule["properties"]), name


def test_dead_letters_waiting_longer_than_the_archive_allows() -> None:
    rule = _rules()["deadLettersWaiting"]["properties"]
    assert rule["scopes"][0]["operator"]["operands"]["operand_1"] == "namespace"
    assert rule["windowSize"] == "PT${deadLetterWaitMinutes}M"
    [criterion] = rule["criteria"]["allOf"]
    assert (criterion["metricNamespace"], criterion["metricName"]) == (
        "Microsoft.ServiceBus/namespaces",
        "DeadletteredMessages",
    )
    # Never 0 in the window: the archive, every 5 minutes, would have emptied it.
    assert (criterion["timeAggregation"], criterion["operator"], criterion["threshold"]) == (
        "Minimum",
        "GreaterThan",
        0,
    )
    [dimension] = criterion["dimensions"]
    assert (dimension["name"], dimension["values"]) == ("EntityName", "queueNames")  # per queue
    allowed = _tree()["parameters"]["deadLetterWaitMinutes"]["decorators"][0]["argument"]
    assert min(allowed) >= 5  # at least one archive run (every 5 minutes in Azure)


def test_failed_sessions_per_pipeline_above_a_threshold_in_a_window() -> None:
    rule = _rules()["failedSessions"]
    criterion = _query_criterion(rule)
    assert 'name == "pipeline.sessions.failed"' in criterion["query"]
    assert "summarize failed = sum(valueSum) by pipeline" in criterion["query"]
    assert criterion["metricMeasureColumn"] == "failed"
    assert [d["name"] for d in criterion["dimensions"]] == ["pipeline"]
    assert (criterion["operator"], criterion["threshold"]) == (
        "GreaterThan",
        "failedSessionsThreshold",
    )
    assert rule["properties"]["windowSize"] == "PT${failedSessionsWindowMinutes}M"


def test_the_archive_timer_failing() -> None:
    criterion = _query_criterion(_rules()["archiveTimerFailing"])
    assert 'operation_Name == "archive_dead_letters" and success == false' in criterion["query"]
    # The line shared/entrypoints/timer_runs.py logs when a run fails.
    assert 'message startswith "archive_dead_letters failed"' in criterion["query"]
    timer_runs = (INFRA.parent / "shared" / "entrypoints" / "timer_runs.py").read_text()
    assert 'logger.error("%s failed: %s", timer, reason)' in timer_runs
    assert (criterion["operator"], criterion["threshold"]) == ("GreaterThan", 0)


def test_a_pipeline_paused_by_its_circuit() -> None:
    criterion = _query_criterion(_rules()["pipelinePaused"])
    query = criterion["query"]
    assert 'name == "pipeline.paused"' in query
    assert 'tostring(customDimensions["cause"]) == "circuit"' in query
    assert [d["name"] for d in criterion["dimensions"]] == ["pipeline"]
    assert (criterion["operator"], criterion["threshold"]) == ("GreaterThanOrEqual", 1)


def test_main_deploys_the_alerts_with_the_thresholds_the_app_shows_locally() -> None:
    main = (INFRA / "main.bicep").read_text()
    module = re.search(
        r"^module alerts 'app/alerts.bicep' = if \(!empty\(alertEmail\)\) \{(.*?)\n\}",
        main,
        re.M | re.S,
    )
    assert module, "main.bicep deploys app/alerts.bicep when an e-mail is given"
    for line in (
        "alertEmail: alertEmail",
        "deadLetterWaitMinutes: alertDeadLetterWaitMinutes",
        "failedSessionsThreshold: alertFailedSessionsThreshold",
        "failedSessionsWindowMinutes: alertFailedSessionsWindowMinutes",
        "queueNames: serviceBus.outputs.queueNames",
    ):
        assert line in module.group(1), line
    function = re.search(
        r"^module functionApp 'app/function.bicep' = \{(.*?)\n\}", main, re.M | re.S
    )
    assert function
    for line in (
        "alertDeadLetterWaitSeconds: alertDeadLetterWaitMinutes * 60",
        "alertFailedSessionsThreshold: alertFailedSessionsThreshold",
        "alertFailedSessionsWindowMinutes: alertFailedSessionsWindowMinutes",
    ):
        assert line in function.group(1), line
    settings = (INFRA / "app" / "function.bicep").read_text()
    for setting, parameter in (
        ("ALERT_DEAD_LETTER_WAIT_SECONDS", "alertDeadLetterWaitSeconds"),
        ("ALERT_FAILED_SESSIONS_THRESHOLD", "alertFailedSessionsThreshold"),
        ("ALERT_FAILED_SESSIONS_WINDOW_MINUTES", "alertFailedSessionsWindowMinutes"),
    ):
        assert f"{{ name: '{setting}', value: string({parameter}) }}" in settings
