"""Fixtures every test package may use."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import pytest


@pytest.fixture(scope="session")
def azurite_connection_string() -> Iterator[str]:
    """A real Azurite (npm, pinned, in memory) for this test session (one per xdist worker),
    started on first use on a free 127.0.0.1 port and stopped at the end."""
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
