"""A pipeline's end-to-end stack: ``make up`` (python -m localdev.up) on free ports, with a
data folder of its own, the archive timer every 2 seconds and retries cut short, so a failed
session is archived within seconds."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from localdev.api_client import AppClient
from tests.e2e.make_up import MakeUp, free_ports

FAST_FAILURES = {
    "DLQ_ARCHIVE_SCHEDULE": "*/2 * * * * *",
    "TASK_RETRY_WINDOW_SECONDS": "0.4",  # two attempts, half a second apart
    "TASK_RETRY_MIN_BACKOFF_SECONDS": "0.5",
    "TASK_RETRY_MAX_BACKOFF_SECONDS": "0.5",
}


@dataclass(frozen=True)
class PipelineStack:
    """The running stack: its API (with the host key), its log lines (``[email]`` lines and
    each task's outcome among them), and the settings ``make up`` exported."""

    run: MakeUp
    api: AppClient
    exports: Mapping[str, str]

    @property
    def lines(self) -> list[str]:
        return self.run.lines

    @property
    def storage(self) -> str:
        """The Storage connection string (Azurite's), for what the test seeds."""
        return self.exports["AzureWebJobsStorage"]

    @property
    def console_url(self) -> str:
        return self.exports["API"].removesuffix("/api") + "/console"


def pipeline_stack(
    settings: Mapping[str, str] | None = None,
) -> Callable[..., Iterator[PipelineStack]]:
    """A module-scoped fixture named where it is assigned (``stack = pipeline_stack()``): the
    stack with ``FAST_FAILURES`` and ``settings`` (``PIPELINE_MODULES`` for a pipeline kept
    outside the app), up before the module's first test, killed after its last."""

    @pytest.fixture(scope="module")
    def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PipelineStack]:
        data = Path(tmp_path_factory.mktemp("pipeline")) / ".data"
        run = MakeUp(data, free_ports(), env={**FAST_FAILURES, **(settings or {})})
        try:
            run.wait_ready()
            exports = run.exports()
            yield PipelineStack(run, AppClient(exports["API"], exports["KEY"]), exports)
        finally:
            run.kill()

    return stack
