from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from shared.config import ConfigurationError
from shared.domain.pipelines import PURCHASE
from shared.domain.retries import RetryPolicy
from tests.builders import APP_SETTINGS, app_settings


def test_defaults_fill_in_what_is_optional() -> None:
    settings = app_settings(APP_SETTINGS)
    assert settings.queue_of(PURCHASE) == "purchase-tasks"
    assert settings.tax_rate == Decimal("0.25")
    assert settings.payment_decline_tokens == frozenset()
    # each pipeline's declared retry policy, as declared
    declared = RetryPolicy(window=600, min_backoff=1, max_backoff=30)
    assert settings.retry(declared) == declared
    assert (settings.task_hold_seconds, settings.circuit_threshold) == (300.0, 5)


def test_the_retry_settings_override_every_pipelines_declared_policy() -> None:
    settings = app_settings(
        APP_SETTINGS | {"TASK_RETRY_WINDOW_SECONDS": "90", "TASK_RETRY_MAX_BACKOFF_SECONDS": "5"}
    )
    declared = RetryPolicy(window=600, min_backoff=1, max_backoff=30)
    assert settings.retry(declared) == RetryPolicy(window=90, min_backoff=1, max_backoff=5)


@pytest.mark.parametrize(
    ("name", "value"),
    [("TASK_RETRY_WINDOW_SECONDS", "-1"), ("TASK_HOLD_SECONDS", "soon")],
)
def test_a_retry_setting_that_is_no_duration_is_refused(name: str, value: str) -> None:
    with pytest.raises(ConfigurationError, match=name):
        app_settings(APP_SETTINGS | {name: value})


def test_identity_based_connections_need_no_secrets() -> None:
    env = {
        k: v
        for k, v in APP_SETTINGS.items()
        if k not in ("ServiceBusConnection", "AzureWebJobsStorage")
    }
    env |= {
        "ServiceBusConnection__fullyQualifiedNamespace": "ns.servicebus.windows.net",
        "AzureWebJobsStorage__accountName": "acct",
        "AzureWebJobsStorage__clientId": "00000000-0000-0000-0000-000000000001",
    }
    settings = app_settings(env)
    assert settings.service_bus.connection_string is None
    assert settings.service_bus.fully_qualified_namespace == "ns.servicebus.windows.net"
    assert settings.storage.account_name == "acct"
    assert (settings.storage.client_id or "").endswith("1")


@pytest.mark.parametrize("name", ["PURCHASE_QUEUE_NAME", "IMPORT_QUEUE_NAME", "REPLAY_QUEUE_NAME"])
def test_a_missing_required_setting_is_named(name: str) -> None:
    env = {k: v for k, v in APP_SETTINGS.items() if k != name}
    with pytest.raises(ConfigurationError, match=name):
        app_settings(env)


@pytest.mark.parametrize("name", ["ServiceBusConnection", "AzureWebJobsStorage"])
def test_a_missing_connection_says_both_ways_to_set_it(name: str) -> None:
    env = {k: v for k, v in APP_SETTINGS.items() if k != name}
    with pytest.raises(ConfigurationError, match=f"{name}__"):
        app_settings(env)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("ORDER_TAX_RATE", "x"),
        ("ORDER_TAX_RATE", "-1"),
        ("SMTP_PORT", "25.5"),
        ("SMTP_STARTTLS", "maybe"),
        ("TASK_RETRY_MIN_BACKOFF_SECONDS", "soon"),
        ("ORDER_NUMBER_BLOCK_SIZE", "1"),
        ("ORDER_NUMBER_BLOCK_SIZE", "-100"),
    ],
)
def test_a_bad_value_is_named(name: str, value: str) -> None:
    with pytest.raises(ConfigurationError, match=name):
        app_settings({**APP_SETTINGS, name: value})


def test_token_lists_are_comma_separated() -> None:
    settings = app_settings({**APP_SETTINGS, "PAYMENT_SIMULATOR_DECLINE_TOKENS": " a, b ,,c"})
    assert settings.payment_decline_tokens == {"a", "b", "c"}


ROOT = Path(__file__).resolve().parents[2]


def test_the_replay_triggers_last_attempt_is_the_hosts_max_dequeue_count_everywhere() -> None:
    # The app cannot ask the host for host.json's value: every place that sets it agrees.
    host = json.loads((ROOT / "host.json").read_text())
    count = host["extensions"]["queues"]["maxDequeueCount"]
    local = json.loads((ROOT / "local.settings.json.example").read_text())["Values"]
    bicep = (ROOT / "infra" / "app" / "function.bicep").read_text()

    assert app_settings(APP_SETTINGS).replay_max_dequeue_count == count
    assert local["REPLAY_MAX_DEQUEUE_COUNT"] == str(count)
    assert f"{{ name: 'REPLAY_MAX_DEQUEUE_COUNT', value: '{count}' }}" in bicep
    assert (
        app_settings({**APP_SETTINGS, "REPLAY_MAX_DEQUEUE_COUNT": "3"}).replay_max_dequeue_count
        == 3
    )


@pytest.mark.parametrize(
    ("block_size", "mode"), [(None, "TableOrderNumbers"), ("100", "TableBlockOrderNumbers")]
)
def test_the_block_size_setting_picks_the_order_number_mode(
    block_size: str | None, mode: str
) -> None:
    from azure.data.tables import TableServiceClient

    from shared.adapters.azure_clients import azurite_connection_string
    from shared.bootstrap import parts

    env = {**APP_SETTINGS, **({"ORDER_NUMBER_BLOCK_SIZE": block_size} if block_size else {})}
    tables = TableServiceClient.from_connection_string(azurite_connection_string())

    numbers = parts.order_numbers(tables, app_settings(env))

    assert type(numbers).__name__ == mode
