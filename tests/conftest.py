"""Fixtures every test package may use."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack

import pytest

# One test process runs gRPC (the local host's settlement service, the extension's settlement
# client) and later forks Spark's JVM launcher (PySpark starts it with a preexec_fn, so a real
# fork). gRPC's fork handlers then run in the child while other threads are inside gRPC, and the
# child can die before it execs Java ("Java gateway process exited before sending its port
# number"). Nothing here needs gRPC in a forked child, so its fork support is off.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")


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
