"""Storage answering every request 503 Server Busy for 60 s, as Azure Storage does when it
throttles, in the middle of an import and 40 orders: nothing is lost or done twice, and nobody
has to replay anything."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from localdev.azurite import Azurite

from .scenario import Chaos, assert_nothing_lost_nothing_twice, chaos_stack, outage_in_the_middle
from .storage_front import StorageFront

pytestmark = pytest.mark.e2e

FRONT: list[StorageFront] = []


@contextmanager
def front_of(azurite: Azurite) -> Iterator[StorageFront]:
    front = StorageFront(azurite.host, azurite.blob_port, azurite.queue_port, azurite.table_port)
    FRONT.append(front)
    try:
        yield front
    finally:
        front.close()


@pytest.fixture(scope="module")
def chaos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chaos]:
    with chaos_stack(
        tmp_path_factory.mktemp("storage-busy"),
        {"TASK_RETRY_WINDOW_SECONDS": "300"},
        storage_via=front_of,
    ) as stack:
        yield stack


@pytest.mark.timeout(900)
def test_storage_answering_server_busy_for_a_minute_costs_no_human(chaos: Chaos) -> None:
    [front] = FRONT

    run = outage_in_the_middle(
        chaos,
        begin=lambda: front.set_busy(True),
        end=lambda: front.set_busy(False),
        seconds=60,
    )

    assert front.answered_busy > 0
    assert_nothing_lost_nothing_twice(chaos, run, dependency="Table Storage")
