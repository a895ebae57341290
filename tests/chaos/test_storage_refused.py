"""Azurite stopped for 120 s and started again on its ports and data, as a Storage failover
looks to a client (every connection refused), in the middle of an import and 40 orders:
nothing is lost or done twice, and nobody has to replay anything."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .scenario import Chaos, assert_nothing_lost_nothing_twice, chaos_stack, outage_in_the_middle

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def chaos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chaos]:
    with chaos_stack(
        tmp_path_factory.mktemp("storage-refused"), {"TASK_RETRY_WINDOW_SECONDS": "300"}
    ) as stack:
        yield stack


@pytest.mark.timeout(900)
def test_storage_refusing_every_connection_for_two_minutes_costs_no_human(chaos: Chaos) -> None:
    azurite = chaos.stack.azurite

    run = outage_in_the_middle(chaos, begin=azurite.stop, end=azurite.start, seconds=120)

    assert_nothing_lost_nothing_twice(chaos, run, dependency="Table Storage")
