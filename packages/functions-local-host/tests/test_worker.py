"""The worker holds one app per process: one host runs at a time."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from functions_local_host import HostConfigurationError, LocalHost
from local_host_testing import FAST_HOST_JSON, SAMPLE_APP


def test_a_second_host_in_the_process_is_refused_while_one_runs(
    run_host: Callable[..., LocalHost],
) -> None:
    first = run_host(["public"])
    second = LocalHost(SAMPLE_APP, {}, FAST_HOST_JSON, functions=["boom"])
    with pytest.raises(HostConfigurationError, match="already running in this process"):
        second.start()
    first.stop()
    with second:
        assert [spec.name for spec in second.functions] == ["boom"]
