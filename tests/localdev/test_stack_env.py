"""What ``make up`` prints and writes to ``.data/stack.env`` for another shell."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from localdev.stack_env import exports, summary


def stack(**settings: str) -> Any:
    """A stand-in with what the block reads of a running ``LocalStack``."""
    return SimpleNamespace(
        api_url="http://127.0.0.1:7071/api",
        console_url="http://127.0.0.1:7071/console",
        function_key="the-host-key",
        storage_connection_string="UseDevelopmentStorage=true",
        servicebus_connection_string="Endpoint=sb://localhost;",
        settings=settings,
        emulator=SimpleNamespace(http_url="http://127.0.0.1:5300"),
        host=SimpleNamespace(
            function_keys=SimpleNamespace(host="the-host-key", master="the-master-key"),
            http_url="http://127.0.0.1:7071",
        ),
        mail=SimpleNamespace(host="127.0.0.1", port=1025),
        email=SimpleNamespace(endpoint="http://127.0.0.1:7075"),
        data=None,
    )


def test_the_key_that_signs_in_to_the_console_is_named_as_such() -> None:
    lines = summary(stack()).splitlines()

    [host] = [line for line in lines if "the-host-key" in line and "Host key" in line]
    assert "sign in to the console" in host
    [master] = [line for line in lines if "the-master-key" in line]
    assert "Master key" in master and "console" not in master
    [status] = [line for line in lines if "Host status" in line]
    assert "http://127.0.0.1:7071/admin/host/status" in status and "master key" in status


def test_stack_env_carries_the_telemetry_settings_the_stack_runs_with(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("APPLICATIONINSIGHTS_CONNECTION_STRING", raising=False)
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" not in exports(stack())

    running = stack(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:4318")
    assert exports(running)["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://127.0.0.1:4318"

    # Set for make up in its environment (the README's OTEL_EXPORTER_OTLP_ENDPOINT=... make up).
    monkeypatch.setenv("APPLICATIONINSIGHTS_CONNECTION_STRING", "InstrumentationKey=x")
    assert exports(stack())["APPLICATIONINSIGHTS_CONNECTION_STRING"] == "InstrumentationKey=x"
