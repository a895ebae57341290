"""One Azurite and one Service Bus emulator per test session; each test runs its own
``LocalHost`` over ``sample_app.py`` with only the functions it tests.

The worker imports the app by its file name from its folder (the script root), as the top-level
module ``sample_app``; the tests read what the functions saw from that same module.

This folder is no package (no ``__init__.py``): pytest imports its modules by their own names,
so they never clash with the repository's ``tests`` package when both are collected together.
The broker and the storage are the repository's test tools: its Service Bus emulator and its
pinned Azurite (``node_modules``), imported from the repository root."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from functions_local_host import LocalHost

REPOSITORY_ROOT = Path(__file__).resolve().parents[3]
if str(REPOSITORY_ROOT) not in sys.path:
    sys.path.append(str(REPOSITORY_ROOT))

from local_host_testing import FAST_HOST_JSON, SAMPLE_APP, emulator_config, sample_app  # noqa: E402
from servicebus_emulator.testing import run_emulator  # noqa: E402

logging.getLogger("functions_local_host").setLevel(logging.INFO)


@pytest.fixture(scope="session")
def servicebus_connection_string() -> Iterator[str]:
    with run_emulator(emulator_config()) as emulator:
        yield emulator.connection_string


@pytest.fixture(scope="session")
def azurite_connection_string() -> Iterator[str]:
    """A real Azurite (the repository's pinned npm package, in memory) for this test session
    (one per xdist worker), on a free 127.0.0.1 port."""
    from localdev.azurite import AzuriteError, run_azurite

    with ExitStack() as stack:
        failure: str | None = None
        try:
            azurite = stack.enter_context(run_azurite())
        except AzuriteError as error:
            failure = str(error)
        if failure is not None:
            pytest.fail(failure, pytrace=False)
        yield azurite.connection_string


@pytest.fixture
def seen() -> Iterator[Any]:
    record = sample_app().SEEN
    record.clear()
    yield record
    record.clear()


@pytest.fixture
def run_host() -> Iterator[Callable[..., LocalHost]]:
    """Start a LocalHost over sample_app with the given functions; stopped after the test."""
    hosts: list[LocalHost] = []

    def start(
        functions: list[str],
        settings: Mapping[str, str] | None = None,
        host_json: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> LocalHost:
        host = LocalHost(
            SAMPLE_APP,
            dict(settings or {}),
            dict(host_json or FAST_HOST_JSON),
            functions=functions,
            drain_timeout=10,
            **options,
        )
        hosts.append(host.start())
        return host

    yield start
    for host in hosts:
        host.stop()
