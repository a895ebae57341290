"""infra/local/config.json (the Service Bus emulator's Config.json) agrees with infra."""

from __future__ import annotations

import json
import math
import re

from localdev.derived_files import SESSION_QUEUE_PROPERTIES
from shared.domain.retries import DEFAULT_HOLD_SECONDS
from tests.builders import PIPELINES

from .conftest import INFRA, ROOT

MAX_DELIVERY_COUNT = SESSION_QUEUE_PROPERTIES["MaxDeliveryCount"]


def _emulator_queues() -> dict[str, dict]:
    config = json.loads((INFRA / "local" / "config.json").read_text())
    (namespace,) = config["UserConfig"]["Namespaces"]
    assert namespace["Name"] == "sbemulatorns"
    assert config["UserConfig"]["Logging"]["Type"] in ("File", "Console")
    return {q["Name"]: q["Properties"] for q in namespace["Queues"]}


def _infra_pipelines() -> list[dict[str, str]]:
    """The pipelines' queues infra creates (main.bicep reads infra/app-resources.json)."""
    main = (INFRA / "main.bicep").read_text()
    assert "var pipelines = appResources.pipelines" in main
    assert "queueNames: [for pipeline in pipelines: pipeline.queue]" in main
    return list(json.loads((INFRA / "app-resources.json").read_text())["pipelines"])


def test_emulator_queues_are_infra_queues() -> None:
    expected = {p["queue"] for p in _infra_pipelines()}
    assert set(_emulator_queues()) == expected


def test_emulator_queues_match_the_local_settings_example() -> None:
    values = json.loads((ROOT / "local.settings.json.example").read_text())["Values"]
    settings = [p["queueSetting"] for p in _infra_pipelines()]
    assert {values[setting] for setting in settings} == set(_emulator_queues())


def test_emulator_queue_properties_match_infra() -> None:
    servicebus = (INFRA / "app" / "servicebus.bicep").read_text()
    assert "requiresSession: true" in servicebus
    delivery = re.search(r"maxDeliveryCount: (\d+)", servicebus)
    assert delivery and int(delivery.group(1)) == MAX_DELIVERY_COUNT
    assert "requiresDuplicateDetection: true" in servicebus
    assert "deadLetteringOnMessageExpiration: true" in servicebus
    lock = re.search(r"lockDuration: '(\w+)'", servicebus)
    assert lock
    for name, props in _emulator_queues().items():
        assert props["RequiresSession"] is True, name
        assert props["MaxDeliveryCount"] == MAX_DELIVERY_COUNT, name
        assert props["RequiresDuplicateDetection"] is True, name
        assert props["DeadLetteringOnMessageExpiration"] is True, name
        assert props["LockDuration"] == lock.group(1), name
        assert set(props) == {
            "DeadLetteringOnMessageExpiration",
            "DefaultMessageTimeToLive",
            "DuplicateDetectionHistoryTimeWindow",
            "ForwardDeadLetteredMessagesTo",
            "ForwardTo",
            "LockDuration",
            "MaxDeliveryCount",
            "RequiresDuplicateDetection",
            "RequiresSession",
        }


def test_compose_mounts_the_config_where_the_emulator_reads_it() -> None:
    compose = (INFRA / "local" / "docker-compose.yml").read_text()
    assert "mcr.microsoft.com/azure-messaging/servicebus-emulator" in compose
    assert "./config.json:/ServiceBus_Emulator/ConfigFiles/Config.json" in compose
    assert "${MSSQL_SA_PASSWORD}" in compose


def test_compose_runs_the_emulator_on_a_supported_sql_server() -> None:
    """Azure SQL Edge is retired; Microsoft's emulator installer runs SQL Server 2022."""
    compose = (INFRA / "local" / "docker-compose.yml").read_text()
    assert "azure-sql-edge" not in compose
    assert re.search(r"^\s+image: mcr\.microsoft\.com/mssql/server:2022-latest$", compose, re.M)
    assert re.search(r"^\s+SQL_SERVER: mssql$", compose, re.M)
    assert re.search(r"^  mssql:$", compose, re.M)


def test_a_retry_window_leaves_service_bus_max_delivery_count_out_of_reach() -> None:
    # A message is handed back (one delivery) each time its invocation has held the session
    # TASK_HOLD_SECONDS: a window takes a few deliveries, and the rest of MaxDeliveryCount is
    # for a long manual pause and for tasks that kill their worker (docs/processor.md).
    for pipeline in PIPELINES:
        deliveries = math.ceil(pipeline.retry.window / DEFAULT_HOLD_SECONDS) + 1
        assert deliveries * 5 <= MAX_DELIVERY_COUNT, pipeline.name
