"""The Service Bus conformance suite: every behaviour the emulator claims, driven only through
the public azure-servicebus SDK, with the sync and the async client.

Targets:
- ``emulator``: this package's emulator, started once per test session (per xdist worker) with
  config.json beside this file.
- ``real``: the namespace in SERVICEBUS_CONNECTION_STRING (a real namespace, or Microsoft's
  emulator started with the same config.json). The queues of that file must exist there with
  the same properties. Skipped when the variable is unset.

Tests are ``async def``; the hook below runs them on a fresh event loop, which is all the async
client needs (the sync client ignores the loop).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sdk import Bus, Queues, Topics
from servicebus_emulator.testing import run_emulator

CONFIG_PATH = Path(__file__).with_name("config.json")
REAL_ENV = "SERVICEBUS_CONNECTION_STRING"


def emulator_config() -> dict[str, Any]:
    return json.loads(CONFIG_PATH.read_text())


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    arguments = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    asyncio.run(pyfuncitem.obj(**arguments))
    return True


@pytest.fixture(scope="session")
def emulator() -> Iterator[Any]:
    """The project's emulator, once per test session."""
    with run_emulator(emulator_config()) as emu:
        yield emu


@pytest.fixture(scope="session", params=["emulator", "real"])
def connection_string(request: pytest.FixtureRequest) -> str:
    if request.param == "real":
        value = os.environ.get(REAL_ENV)
        if not value:
            pytest.skip(f"{REAL_ENV} is not set: no real namespace to compare with")
        return value
    return request.getfixturevalue("emulator").connection_string


@pytest.fixture(params=["sync", "async"])
def bus(request: pytest.FixtureRequest, connection_string: str) -> Bus:
    management = None
    if request.node.callspec.params["connection_string"] == "emulator":
        emulator = request.getfixturevalue("emulator")
        management = (emulator.host, emulator.http_port)
    return Bus(request.param, connection_string, management)


@pytest.fixture(scope="session")
def queues() -> Queues:
    return Queues()


@pytest.fixture(scope="session")
def topics() -> Topics:
    return Topics()
