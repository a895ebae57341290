"""The Service Bus emulator unreachable for 60 s (stopped, then started again on its ports and
data), in the middle of an import and 40 orders: nothing is lost or done twice, and nobody
has to replay anything."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .scenario import Chaos, assert_nothing_lost_nothing_twice, chaos_stack, outage_in_the_middle

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def chaos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chaos]:
    with chaos_stack(
        tmp_path_factory.mktemp("servicebus-down"), {"TASK_RETRY_WINDOW_SECONDS": "300"}
    ) as stack:
        yield stack


@pytest.mark.timeout(900)
def test_service_bus_out_of_reach_for_a_minute_costs_no_human(chaos: Chaos) -> None:
    emulator = chaos.stack.emulator

    run = outage_in_the_middle(chaos, begin=emulator.stop, end=emulator.start, seconds=60)

    assert_nothing_lost_nothing_twice(chaos, run, dependency="Service Bus")
